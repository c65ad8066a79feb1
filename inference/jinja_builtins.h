// The Jinja subset's built-in filters, tests, methods of strings, lists and dicts, and global
// functions, as Jinja 3 and Python define them (only those chat templates use).
#pragma once
#include <string>
#include <vector>

#include "inference/jinja_value.h"

namespace kvs::jinja {

// The items a for loop visits: a list's items, a dict's keys, a string's characters; none for
// undefined. Throws Error for what cannot be iterated.
std::vector<Value> iterate(const Value& v);
// `item in container` (a substring, a list item, a dict key).
bool contains(const Value& container, const Value& item);
// v | name(args, kwargs); throws Error for an unknown filter or wrong arguments.
Value apply_filter(const std::string& name, const Value& v, std::vector<Value>& args, Kwargs& kwargs);
// v is name(args); throws Error for an unknown test.
bool apply_test(const std::string& name, const Value& v, std::vector<Value>& args);
// obj.name: a dict's entry or method, a namespace's attribute, a string's or list's method
// (bound to it); undefined where there is none.
Value attribute(const Value& obj, const std::string& name);
// transformers' strftime_now: the local time as Python's strftime writes `format` (C locale).
std::string strftime_now(const std::string& format);
// The functions every template sees: range, namespace, dict, raise_exception, strftime_now.
Dict global_functions();

}  // namespace kvs::jinja

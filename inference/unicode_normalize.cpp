// Unicode normalization through utf8proc_map (explicit length: embedded NULs stay text).
#include "inference/unicode_normalize.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

namespace kvs {

bool unicode_form_named(std::string_view type, UnicodeForm& form) {
  if (type == "NFC") form = UnicodeForm::NFC;
  else if (type == "NFD") form = UnicodeForm::NFD;
  else if (type == "NFKC") form = UnicodeForm::NFKC;
  else if (type == "NFKD") form = UnicodeForm::NFKD;
  else return false;
  return true;
}

std::string unicode_normalize(std::string_view text, UnicodeForm form) {
  if (form == UnicodeForm::None || text.empty()) return std::string(text);
  int options = UTF8PROC_STABLE;
  switch (form) {
    case UnicodeForm::NFC: options |= UTF8PROC_COMPOSE; break;
    case UnicodeForm::NFD: options |= UTF8PROC_DECOMPOSE; break;
    case UnicodeForm::NFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case UnicodeForm::NFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    case UnicodeForm::None: break;
  }
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          static_cast<utf8proc_ssize_t>(text.size()), &out,
                                          static_cast<utf8proc_option_t>(options));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  if (n < 0) return std::string(text);  // invalid UTF-8 (or out of memory): left as it is
  return std::string(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n));
}

}  // namespace kvs

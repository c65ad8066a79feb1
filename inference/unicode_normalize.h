// Unicode normalization forms of tokenizer.json normalizers (NFC, NFD, NFKC, NFKD), by utf8proc:
// Qwen2 and other byte-level BPE tokenizers compose text to NFC before splitting it, so "e" + a
// combining acute and a precomposed "é" give the same tokens.
#pragma once
#include <string>
#include <string_view>

namespace kvs {

enum class UnicodeForm { None, NFC, NFD, NFKC, NFKD };

// The form a tokenizer.json normalizer "type" names; false for any other type.
bool unicode_form_named(std::string_view type, UnicodeForm& form);

// `text` in `form`. Text that is not valid UTF-8 is returned unchanged (the byte-level
// tokenizers encode any bytes; normalization is defined on code points only).
std::string unicode_normalize(std::string_view text, UnicodeForm form);

}  // namespace kvs

// Asks before a file the user named is overwritten (a recording's output, "Save trace as"): a
// modal "PATH exists. Replace it?" with Replace and Cancel.
#pragma once
#include <string>

namespace kvs {

class ReplaceConfirm {
 public:
  // True when `path` can be written without asking (nothing is there); otherwise the question
  // opens at the next draw() and this returns false.
  bool clear_to_write(const std::string& path);
  // Draws the question while it is open; true on the frame the user chose Replace.
  bool draw();

 private:
  std::string path_;  // asked about; "" when no question is open
  bool open_ = false;
};

}  // namespace kvs

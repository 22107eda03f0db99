// shell_quote.hpp - a word for a command line that the user may copy into a POSIX shell: the
// "continue with --resume ..." and "sample with: ..." hints name paths that may hold spaces,
// quotes or other characters the shell would split or expand.
#pragma once
#include <string>

namespace headgrad::train {

// `word` as is when it consists of characters no POSIX shell treats specially (letters, digits
// and _ - . / : , + = @ %), else in single quotes with each ' written as '\'' (POSIX, "Shell
// Command Language", 2.2.3 Single-Quotes: nothing inside single quotes is special).
std::string shell_quote(const std::string& word);

} // namespace headgrad::train

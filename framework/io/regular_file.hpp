// regular_file.hpp - opening a file the user named (a checkpoint, a corpus, a log) for reading,
// only if it is a regular file.
//
// A FIFO, a character device or a socket given where a file is expected would hang the program
// (open() of a FIFO waits for a writer; reading /dev/zero never ends) or read something that is
// not a file's content. So the file is opened with O_NONBLOCK (opening a FIFO then returns at
// once), its type is checked with fstat on that descriptor (no window for a rename between the
// check and the open), and only a regular file is handed back, with blocking reads restored.
// Symbolic links are followed: a link to a regular file is one.
#pragma once
#include <cstdint>
#include <string>

namespace headgrad::io {

// The text of an errno value ("No such file or directory"), for the messages of file errors.
std::string errno_text(int err);

// What the file at an open descriptor is, in words: "a directory", "a FIFO (named pipe)", ...
// ("a regular file" for one).
std::string file_kind(int fd);

// Throws std::runtime_error (as open_regular_file) unless `fd`, opened from `path`, is a regular
// file; for callers that open with their own flags and messages (then use O_NONBLOCK, as below).
void require_regular_file(int fd, const std::string& path, const std::string& wanted = "a file");

// The descriptor (O_RDONLY | O_CLOEXEC, blocking) of the regular file at `path`; the caller
// closes it. Throws std::runtime_error "<path>: <problem>": it cannot be opened (the errno text),
// or "is a directory, not <wanted>", or "is <kind>, not a regular file (<wanted> must be one)".
int open_regular_file(const std::string& path, const std::string& wanted = "a file");

// The whole content of the regular file at `path`, read with one allocation of its size (as
// fstat reports it). Errors as open_regular_file, and std::runtime_error for a read error.
std::string read_regular_file(const std::string& path, const std::string& wanted = "a file");

} // namespace headgrad::io

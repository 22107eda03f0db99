// run_directory.hpp - a training run's output directory, held for the run's lifetime: created if
// missing, locked against a second run, and refused when it holds another run's checkpoint.
//
// Two runs in one directory would interleave metrics.csv and could leave one run's model beside
// the other's optimizer state at the same step, which --resume would accept; and a fresh run into
// a finished run's directory would replace its model. The lock is flock(2) on DIR/run.lock: the
// kernel releases it when the holder exits in any way (SIGKILL included), so a dead run never
// blocks its directory. The file names the holder.
//
// What a run writes there it writes itself: a file of its names that it did not create (a user's
// metrics.csv, pictures without a checkpoint) is not replaced without --overwrite, and a symbolic
// link (or a FIFO, a directory, ...) under one of its names is refused, so that no write of the
// run ever goes through a link to somewhere else. The files are also opened with O_NOFOLLOW.
#pragma once
#include <string>
#include <vector>

namespace headgrad::train {

class RunDirectory {
public:
  // `resume`: the model.safetensors this run continues ("" for a fresh run); `overwrite`: this
  // run replaces the checkpoint of another run found there (removing that run's files first, so
  // the directory never holds a mix of two runs). Throws std::invalid_argument, one line naming
  // --out:
  //   "--out DIR is in use by another run (pid 4242 on host a, started 2024-05-01 12:00:00); ..."
  //   "--out DIR holds the checkpoint of another run (step 600); --resume DIR/model.safetensors
  //    continues it, --overwrite replaces it, or choose another --out"
  //   "--out DIR holds metrics.csv, curves.svg but no checkpoint (another program's files, or a run
  //    killed before its first save); --overwrite replaces them, or choose another --out"
  //   "--out DIR: metrics.csv is a symbolic link (to /elsewhere); a run does not write through
  //    links: remove it or choose another --out"
  // and the texts of a directory that cannot be created or written.
  RunDirectory(const std::string& dir, const std::string& resume, bool overwrite);
  ~RunDirectory(); // releases the lock
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;

  // The directory holds the checkpoint this run resumes: its metrics.csv is this run's to continue.
  bool continues_run() const { return continues_; }

  // The names a run writes in its directory (besides the temporary files of atomic writes).
  static const std::vector<std::string>& file_names();

private:
  int lock_fd_ = -1;
  bool continues_ = false;
};

} // namespace headgrad::train

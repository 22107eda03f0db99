#include "train/pictures/graph_files.hpp"

#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include "train/pictures/svg_file.hpp"

extern char** environ;

namespace headgrad::train {
namespace {

// Runs argv (argv[0] a path) with stdout and stderr discarded; returns its exit code, or -1 if
// it could not be started or did not exit normally.
int run_quietly(const std::vector<std::string>& argv) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  std::vector<std::string> args = argv;
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  pid_t pid = 0;
  const int started = posix_spawn(&pid, cargs[0], &actions, nullptr, cargs.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (started != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

} // namespace

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (std::filesystem::path(dir.empty() ? "." : dir) / name).string();
    if (access(candidate.c_str(), X_OK) == 0 && !std::filesystem::is_directory(candidate)) return candidate;
  }
  return "";
}

std::string write_graph_files(const std::string& path, const Graph& graph, const std::string& title) {
  const std::string dot_path = std::filesystem::path(path).replace_extension(".dot").string();
  const std::string svg_path = std::filesystem::path(path).replace_extension(".svg").string();
  write_svg_file(dot_path, graph_dot(graph, title));
  const std::string dot = find_on_path("dot");
  if (dot.empty())
    return fmt::format("wrote {} ({} nodes, {} edges); no SVG: Graphviz's dot is not installed (Debian: apt-get "
                       "install graphviz, then dot -Tsvg {} -o {})",
                       dot_path, graph.nodes.size(), graph.edge_count(), dot_path, svg_path);
  const int rc = run_quietly({dot, "-Tsvg", "-o", svg_path, dot_path});
  if (rc != 0)
    return fmt::format("wrote {} ({} nodes, {} edges); Graphviz's dot failed on it (exit {}), so no SVG", dot_path,
                       graph.nodes.size(), graph.edge_count(), rc);
  return fmt::format("wrote {} and {} ({} nodes, {} edges)", dot_path, svg_path, graph.nodes.size(),
                     graph.edge_count());
}

} // namespace headgrad::train

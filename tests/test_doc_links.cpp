// The repository's Markdown cannot point at nothing: every relative link of every .md file in the
// source tree (README.md, docs/, bench/, framework/ops/DERIVATIVES.md, ...) names a file or folder
// that exists, inside the tree, and a link with a #fragment into a Markdown file names one of that
// file's headings (GitHub's anchors: the heading's text in lower case, punctuation dropped, spaces
// as hyphens, "-1", "-2", ... after repeats). Links inside code (fenced blocks, `spans`) are text,
// not links, and http(s)/mailto links are not fetched. A negative control plants broken links in
// a scratch tree and checks that each is reported, and that the good ones around them are not.
#include <doctest/doctest.h>

#include <cctype>
#include <map>
#include <set>

#include "tests/test_support.hpp"

using test_support::lines_of;
using test_support::starts_with;
namespace fs = std::filesystem;

namespace {

struct Link {
  int line = 0;
  std::string target; // as written: path, path#fragment or #fragment
};

// The line with its code spans blanked: a span opens with a run of n backticks and closes with the
// next run of exactly n (CommonMark); an unclosed run is literal text.
std::string without_code_spans(const std::string& line) {
  std::string out;
  std::size_t i = 0;
  while (i < line.size()) {
    if (line[i] != '`') {
      out += line[i++];
      continue;
    }
    std::size_t run = 0;
    while (i + run < line.size() && line[i + run] == '`') ++run;
    std::size_t close = std::string::npos;
    for (std::size_t j = i + run; j < line.size();) {
      if (line[j] != '`') {
        ++j;
        continue;
      }
      std::size_t r = 0;
      while (j + r < line.size() && line[j + r] == '`') ++r;
      if (r == run) {
        close = j;
        break;
      }
      j += r;
    }
    if (close == std::string::npos) {
      out.append(line, i, run);
      i += run;
    } else {
      out += ' ';
      i = close + run;
    }
  }
  return out;
}

// The lines of a Markdown file outside fenced code blocks (``` or ~~~, up to 3 spaces of indent;
// the block ends at a fence of the same character at least as long), with their line numbers.
std::vector<std::pair<int, std::string>> prose_lines(const std::string& markdown) {
  std::vector<std::pair<int, std::string>> out;
  char fence = 0;
  std::size_t fence_len = 0;
  int number = 0;
  for (const std::string& line : lines_of(markdown)) {
    ++number;
    const std::size_t indent = line.find_first_not_of(' ');
    if (indent != std::string::npos && indent <= 3 && (line[indent] == '`' || line[indent] == '~')) {
      const char c = line[indent];
      std::size_t run = 0;
      while (indent + run < line.size() && line[indent + run] == c) ++run;
      if (run >= 3) {
        if (fence == 0) {
          fence = c;
          fence_len = run;
          continue;
        }
        if (c == fence && run >= fence_len && line.find_first_not_of(" \r", indent + run) == std::string::npos) {
          fence = 0;
          continue;
        }
      }
    }
    if (fence == 0) out.emplace_back(number, line);
  }
  return out;
}

// Inline links and images, [text](target) and ![alt](target), and reference definitions
// ([label]: target), outside code.
std::vector<Link> links_of(const std::string& markdown) {
  std::vector<Link> links;
  for (const auto& [number, raw] : prose_lines(markdown)) {
    const std::string line = without_code_spans(raw);
    const std::size_t lead = line.find_first_not_of(' ');
    if (lead != std::string::npos && lead <= 3 && line[lead] == '[') {
      const std::size_t close = line.find("]:", lead);
      if (close != std::string::npos && line.find(']', lead) == close) {
        std::istringstream rest(line.substr(close + 2));
        std::string target;
        if (rest >> target) links.push_back({number, target});
        continue;
      }
    }
    for (std::size_t at = line.find("]("); at != std::string::npos; at = line.find("](", at + 2)) {
      std::size_t i = at + 2;
      std::string target;
      if (i < line.size() && line[i] == '<') {
        const std::size_t end = line.find('>', i);
        if (end == std::string::npos) continue;
        target = line.substr(i + 1, end - i - 1);
      } else {
        int depth = 0;
        for (; i < line.size(); ++i) {
          const char c = line[i];
          if (c == ' ' || c == '\t') break;
          if (c == '(') ++depth;
          if (c == ')' && depth-- == 0) break;
          target += c;
        }
      }
      if (!target.empty()) links.push_back({number, target});
    }
  }
  return links;
}

// Whether a link leaves the repository (http:, https:, mailto:, ...): a scheme before any '/'.
bool is_external(const std::string& target) {
  const std::size_t colon = target.find(':');
  if (colon == std::string::npos || colon == 0) return false;
  const std::size_t slash = target.find_first_of("/#");
  if (slash != std::string::npos && slash < colon) return false;
  for (std::size_t i = 0; i < colon; ++i)
    if (!std::isalnum(static_cast<unsigned char>(target[i])) && target[i] != '+' && target[i] != '-' &&
        target[i] != '.')
      return false;
  return true;
}

std::string percent_decoded(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Whether GitHub keeps the code point in an anchor: letters, marks, numbers, '_', '-' and spaces
// (Unicode's L, M, N and Pc). Exact for ASCII; beyond it, a range approximation: the letters of
// Latin-1 and the scripts up to U+1FFF, the superscript and subscript digits and CJK are kept, the
// punctuation, arrows and mathematical symbols of U+2000-U+303F and Latin-1's are dropped.
bool kept_in_anchor(char32_t cp) {
  if (cp < 0x80) return std::isalnum(static_cast<int>(cp)) || cp == '_' || cp == '-' || cp == ' ';
  if (cp == 0xB2 || cp == 0xB3 || cp == 0xB9 || (cp >= 0xBC && cp <= 0xBE)) return true; // ² ³ ¹ ¼ ½ ¾
  if (cp < 0xC0 || cp == 0xD7 || cp == 0xF7) return false;                                // Latin-1 punctuation, × ÷
  if (cp < 0x2000) return true;                                                           // Latin, Greek, Cyrillic, ...
  if (cp >= 0x2070 && cp <= 0x209F) return !(cp >= 0x207A && cp <= 0x207E) && !(cp >= 0x208A && cp <= 0x208E);
  return cp >= 0x3040; // CJK and beyond; 0x2000-0x303F are punctuation and symbols
}

// GitHub's anchor for a heading's text.
std::string anchor_of(std::string heading) {
  // [text](target) shows as text; emphasis and code markers are not part of the text.
  for (std::size_t at = heading.find("]("); at != std::string::npos; at = heading.find("](")) {
    const std::size_t open = heading.rfind('[', at);
    const std::size_t close = heading.find(')', at);
    if (open == std::string::npos || close == std::string::npos) break;
    heading = heading.substr(0, open) + heading.substr(open + 1, at - open - 1) + heading.substr(close + 1);
  }
  std::string slug;
  for (std::size_t i = 0; i < heading.size();) {
    const auto b = static_cast<unsigned char>(heading[i]);
    const int len = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
    char32_t cp = len == 1 ? b : b & (0x7F >> len);
    for (int k = 1; k < len && i + static_cast<std::size_t>(k) < heading.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(heading[i + static_cast<std::size_t>(k)]) & 0x3F);
    if (kept_in_anchor(cp)) {
      if (cp == ' ')
        slug += '-';
      else if (len == 1)
        slug += static_cast<char>(std::tolower(b));
      else
        slug.append(heading, i, static_cast<std::size_t>(len));
    }
    i += static_cast<std::size_t>(len);
  }
  return slug;
}

// The anchors of a Markdown file's ATX headings (# to ######), repeats numbered as GitHub does.
std::set<std::string> anchors_of(const std::string& markdown) {
  std::set<std::string> anchors;
  std::map<std::string, int> seen;
  for (const auto& [number, line] : prose_lines(markdown)) {
    std::size_t level = 0;
    while (level < line.size() && line[level] == '#') ++level;
    if (level == 0 || level > 6 || level >= line.size() || line[level] != ' ') continue;
    std::string text = line.substr(level + 1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '#' || text.back() == '\r')) text.pop_back();
    const std::string base = anchor_of(text);
    const int n = seen[base]++;
    anchors.insert(n == 0 ? base : base + "-" + std::to_string(n));
  }
  return anchors;
}

struct Scan {
  std::vector<std::string> files;  // the Markdown files read, relative to the root
  std::vector<std::string> broken; // "file:line: target: why"
  int checked = 0;                 // relative links checked
};

bool is_build_or_hidden(const fs::path& dir) {
  const std::string name = dir.filename().string();
  return (!name.empty() && name[0] == '.') || fs::exists(dir / "CMakeCache.txt");
}

// Every relative link of every .md file under root (hidden folders and CMake build trees left out).
Scan check_links(const fs::path& root) {
  Scan scan;
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    if (it->is_directory() && is_build_or_hidden(it->path())) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && it->path().extension() == ".md") files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  std::map<fs::path, std::set<std::string>> anchor_cache;
  auto anchors = [&](const fs::path& file) -> const std::set<std::string>& {
    auto found = anchor_cache.find(file);
    if (found == anchor_cache.end())
      found = anchor_cache.emplace(file, anchors_of(test_support::read_file(file))).first;
    return found->second;
  };
  const fs::path canonical_root = fs::weakly_canonical(root);
  for (const fs::path& file : files) {
    const std::string name = fs::relative(file, root).generic_string();
    scan.files.push_back(name);
    for (const Link& link : links_of(test_support::read_file(file))) {
      if (is_external(link.target)) continue;
      ++scan.checked;
      const auto report = [&](const std::string& why) {
        scan.broken.push_back(fmt::format("{}:{}: ({}): {}", name, link.line, link.target, why));
      };
      const std::size_t hash = link.target.find('#');
      const std::string path_part = percent_decoded(link.target.substr(0, hash));
      const std::string fragment = hash == std::string::npos ? "" : percent_decoded(link.target.substr(hash + 1));
      fs::path resolved = file;
      if (!path_part.empty())
        resolved = path_part[0] == '/' ? root / path_part.substr(1) : file.parent_path() / path_part;
      resolved = fs::weakly_canonical(resolved);
      const std::string inside = fs::relative(resolved, canonical_root).generic_string();
      if (inside.empty() || starts_with(inside, "..")) {
        report("points outside the repository");
        continue;
      }
      if (!fs::exists(resolved)) {
        report(fmt::format("no such file or folder: {}", inside));
        continue;
      }
      if (fragment.empty() || resolved.extension() != ".md") continue;
      std::string lower = fragment;
      std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
      if (!anchors(resolved).count(lower)) report(fmt::format("{} has no heading with the anchor #{}", inside, lower));
    }
  }
  return scan;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

} // namespace

TEST_CASE("doc links: every relative link in the repository's Markdown names a file, folder or heading that exists") {
  const Scan scan = check_links(HEADGRAD_SOURCE_DIR);
  INFO("Markdown files read:\n", joined(scan.files));
  // The scan must have read what it is meant to guard, or it proves nothing.
  const std::set<std::string> read(scan.files.begin(), scan.files.end());
  CHECK(read.count("README.md") == 1);
  for (const auto& e : fs::directory_iterator(fs::path(HEADGRAD_SOURCE_DIR) / "docs"))
    if (e.path().extension() == ".md") CHECK(read.count("docs/" + e.path().filename().string()) == 1);
  CHECK(scan.checked > 100);
  INFO("broken links:\n", joined(scan.broken));
  CHECK(scan.broken.empty());
}

TEST_CASE("doc links: the check reports a planted broken link, a missing anchor and a link out of the tree") {
  test_support::TempDir root;
  fs::create_directories(root.path / "docs");
  fs::create_directories(root.path / "src");
  test_support::write_file(root / "src/op.cpp", "");
  test_support::write_file(root / "docs/guide.md",
                           "# A guide\n\n## Start-up: the BLAS kernel\n\n## `./dev.sh bench text` — against PyTorch\n\n"
                           "## Twice\n\n## Twice\n\nBack to the [README](../README.md#headgrad).\n");
  test_support::write_file(root / "README.md",
                           "# headgrad\n\n"
                           "Good: [guide](docs/guide.md), [a folder](src), [a file](src/op.cpp), [top](#headgrad),\n"
                           "[heading](docs/guide.md#start-up-the-blas-kernel), [repeat](docs/guide.md#twice-1),\n"
                           "[dashes](docs/guide.md#devsh-bench-text--against-pytorch), ![img](<src/op.cpp>),\n"
                           "[web](https://d2l.ai/missing.md), [root](/src/op.cpp).\n"
                           "Code is not a link: `[x](gone.md)` and\n```cpp\nauto f = [&](int gone) {};\n```\n"
                           "Broken: [file](docs/gone.md) and [anchor](docs/guide.md#no-such-heading)\n"
                           "and [outside](../elsewhere.md).\n\n[ref]: src/missing.cpp\n");
  const Scan scan = check_links(root.path);
  INFO("reported:\n", joined(scan.broken));
  CHECK(scan.files == std::vector<std::string>{"README.md", "docs/guide.md"});
  REQUIRE(scan.broken.size() == 4);
  CHECK(test_support::contains(scan.broken[0], "README.md:11: (docs/gone.md): no such file"));
  CHECK(test_support::contains(scan.broken[1], "README.md:11: (docs/guide.md#no-such-heading): docs/guide.md has no "
                                                "heading with the anchor #no-such-heading"));
  CHECK(test_support::contains(scan.broken[2], "README.md:12: (../elsewhere.md): points outside the repository"));
  CHECK(test_support::contains(scan.broken[3], "README.md:14: (src/missing.cpp): no such file"));
  CHECK(scan.checked == 14); // 9 good and 4 broken in README.md, 1 good in docs/guide.md
}

TEST_CASE("doc links: anchors follow GitHub's: lower case, punctuation dropped, spaces as hyphens") {
  CHECK(anchor_of("Start-up: the BLAS kernel and the wait policy") == "start-up-the-blas-kernel-and-the-wait-policy");
  CHECK(anchor_of("11. Write the attention backward yourself") == "11-write-the-attention-backward-yourself");
  CHECK(anchor_of("`./dev.sh bench text` — the character language model against PyTorch") ==
        "devsh-bench-text--the-character-language-model-against-pytorch");
  CHECK(anchor_of("Why it is `y ⊙ (dy − ⟨dy, y⟩)`") == "why-it-is-y--dy--dy-y");
  CHECK(anchor_of("No gradient (`compare.hpp`)") == "no-gradient-comparehpp");
  CHECK(anchor_of("See [the guide](docs/x.md) here") == "see-the-guide-here");
}

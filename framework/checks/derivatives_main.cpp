// headgrad_derivatives - writes framework/ops/DERIVATIVES.md's table from the rows the op families
// register (framework/checks/derivatives_table.hpp):
//   build/headgrad_derivatives                              prints the table
//   build/headgrad_derivatives framework/ops/DERIVATIVES.md  rewrites the table in that file
#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>

#include "framework/checks/derivatives_table.hpp"

int main(int argc, char** argv) {
  using namespace headgrad::checks;
  try {
    const std::string table = derivatives_table(derivative_rows());
    if (argc == 1) {
      std::fputs(table.c_str(), stdout);
      return 0;
    }
    if (argc != 2 || argv[1][0] == '-') {
      std::fputs("usage: headgrad_derivatives [framework/ops/DERIVATIVES.md]\n", stderr);
      return 2;
    }
    std::ifstream in(argv[1], std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "headgrad_derivatives: cannot read %s\n", argv[1]);
      return 2;
    }
    std::stringstream doc;
    doc << in.rdbuf();
    const std::string text = with_table(doc.str(), table);
    in.close();
    std::ofstream out(argv[1], std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) {
      std::fprintf(stderr, "headgrad_derivatives: cannot write %s\n", argv[1]);
      return 1;
    }
    std::printf("%s: %zu rows\n", argv[1], derivative_rows().size());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "headgrad_derivatives: %s\n", e.what());
    return 1;
  }
}

#include "framework/checks/registry.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>

#include "framework/checks/differential_calls.hpp"

namespace headgrad::checks {
namespace {

// A function-local static: constructed on first use, so registrars in other translation units
// may run in any order before main.
std::vector<CheckFamily>& registry() {
  static std::vector<CheckFamily> families;
  return families;
}

} // namespace

RegisterChecks::RegisterChecks(CheckFamily family) { registry().push_back(std::move(family)); }

std::vector<CheckFamily> check_families() {
  std::vector<CheckFamily> out = registry();
  std::sort(out.begin(), out.end(), [](const CheckFamily& a, const CheckFamily& b) { return a.name < b.name; });
  for (std::size_t i = 1; i < out.size(); ++i)
    if (out[i].name == out[i - 1].name)
      throw std::logic_error("check_families: rows of " + out[i].name + " registered twice");
  return out;
}

namespace {

// The ops one kind of list names over every family.
std::set<std::string> listed(std::vector<std::string> CheckFamily::*list) {
  std::set<std::string> ops;
  for (const auto& family : check_families()) ops.insert((family.*list).begin(), (family.*list).end());
  return ops;
}

} // namespace

std::vector<GradcheckCase> gradcheck_cases() {
  GradcheckRows rows;
  for (const auto& family : check_families())
    for (auto add_rows : family.gradcheck_rows) add_rows(rows);
  return std::move(rows.cases);
}

std::vector<GradcheckCase> gradcheck_cases(const std::string& group) {
  std::vector<GradcheckCase> out;
  for (auto& c : gradcheck_cases())
    if (c.group == group) out.push_back(std::move(c));
  return out;
}

std::vector<MisuseRow> misuse_rows() {
  std::vector<MisuseRow> all;
  for (const auto& family : check_families()) {
    if (!family.misuse_rows) continue;
    std::vector<MisuseRow> rows = family.misuse_rows();
    all.insert(all.end(), std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
  }
  return all;
}

std::vector<RefusedCall> refused_calls() {
  std::vector<RefusedCall> all;
  for (const auto& family : check_families())
    if (family.refused_calls)
      for (auto& c : family.refused_calls()) all.push_back(std::move(c));
  return all;
}

std::map<std::string, DifferentialFn> differential_calls() {
  std::map<std::string, DifferentialFn> calls;
  std::map<std::string, std::string> family_of;
  for (const auto& family : check_families()) {
    if (!family.differential_calls) continue;
    for (auto& c : family.differential_calls()) {
      const auto [at, added] = family_of.emplace(c.op, family.name);
      if (!added)
        throw std::logic_error("differential_calls: " + c.op + " registered by " + at->second + " and " + family.name);
      calls.emplace(c.op, std::move(c.call));
    }
  }
  return calls;
}

std::set<std::string> composite_ops() { return listed(&CheckFamily::composite); }
std::set<std::string> no_gradient_ops() { return listed(&CheckFamily::no_gradient); }
std::set<std::string> not_replayed_ops() { return listed(&CheckFamily::not_replayed); }

GradcheckRow run_gradcheck_case(const GradcheckCase& c) {
  GradcheckRow row{&c, c.run ? c.run(c.options) : gradcheck(c.fn, c.make_inputs(), c.options), 0.0, 0.0};
  for (const auto& r : row.result.inputs) {
    row.max_abs_err = std::max(row.max_abs_err, r.max_abs_err);
    row.max_rel_err = std::max(row.max_rel_err, r.max_rel_err);
  }
  return row;
}

} // namespace headgrad::checks

// result_json.hpp - reading the children's results: a side that failed or did not run has no
// such key (or is null), and its numbers read as NaN, which the table prints as "-".
#pragma once
#include <cmath>
#include <nlohmann/json.hpp>

namespace headgrad::bench {

inline bool has(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && !j[key].is_null();
}
inline double num(const nlohmann::json& j, const char* key) { return has(j, key) ? j[key].get<double>() : NAN; }

} // namespace headgrad::bench

#include "bench/run_config_json.hpp"

#include "framework/optim/optimizer.hpp"

namespace headgrad::bench {
namespace {

using json = nlohmann::json;

bool is_shape(const train::FieldInfo& f) { return f.role == train::Role::shape; }

json value_json(data::Task v) { return data::task_name(v); }
template <typename T> json value_json(const T& v) { return v; }

void read_value(const json& j, data::Task& v) { v = data::parse_task(j.get<std::string>()); }
template <typename T> void read_value(const json& j, T& v) { v = j.get<T>(); }

// The fields whose shape-ness is `shape`, as one JSON object.
json fields_json(const train::RunConfig& c, bool shape) {
  json j = json::object();
  train::visit_run_fields([&](const train::FieldInfo& f, auto member) {
    if (is_shape(f) == shape) j[train::metadata_key(f)] = value_json(c.*member);
  });
  return j;
}

void read_fields(train::RunConfig& c, const json& j, bool shape) {
  train::visit_run_fields([&](const train::FieldInfo& f, auto member) {
    if (is_shape(f) == shape) read_value(j.at(train::metadata_key(f)), c.*member);
  });
}

} // namespace

json shape_json(const train::RunConfig& c) { return fields_json(c, true); }

json settings_json(const train::RunConfig& c) {
  json j = fields_json(c, false);
  const optim::AdamOptions adam; // beta1 and eps make_optimizer leaves at their defaults (beta2 is a field)
  j["beta1"] = adam.beta1;
  j["eps"] = adam.eps;
  return j;
}

train::RunConfig run_config_from_json(const json& shape, const json& settings) {
  train::RunConfig c;
  read_fields(c, shape, true);
  read_fields(c, settings, false);
  return c;
}

} // namespace headgrad::bench

// /runs/<name> groups (policy runs: kept sets, metrics, live tokens and rows) and named float32
// arrays (/heads/*, /layers/similarity): validation, writing and reading.
#include <set>
#include <stdexcept>

#include "analysis/h5_util.h"
#include "analysis/trace_schema.h"
#include "inference/errors.h"

namespace kvs::trace_schema {

namespace {

const std::set<std::string>& reserved_run_attrs() {
  static const std::set<std::string> names = {"policy", "params",  "budget", "eviction",    "mode",
                                              "text",   "n_steps", "device", "device_dtype"};
  return names;
}

bool plain_name(const std::string& s) {
  return !s.empty() && s.size() <= 255 && s.find('/') == std::string::npos && s != "." && s != "..";
}

std::vector<hsize_t> hdims(const std::vector<uint64_t>& d) { return std::vector<hsize_t>(d.begin(), d.end()); }

std::string run_group(const std::string& name) { return std::string(kRuns) + "/" + name; }

}  // namespace

void validate_run(const RunData& run, const TraceMeta& m, const std::string& path) {
  auto bad = [&](const std::string& problem) { return input_error(path, "run '" + run.name + "': " + problem); };
  if (!plain_name(run.name)) throw bad("invalid run name (empty, too long, or containing '/')");
  if (run.eviction != "simulated" && run.eviction != "real")
    throw bad("eviction must be \"simulated\" or \"real\", not \"" + run.eviction + "\"");
  const uint64_t L = m.shape.n_layers, H = m.shape.n_heads, Hkv = m.shape.n_kv_heads, T = m.total_len();
  const uint64_t cell = L * Hkv * T;  // kept values per step
  if (cell == 0 || run.kept.size() % cell != 0)
    throw bad("kept has " + std::to_string(run.kept.size()) + " values, not a multiple of L*Hkv*T = " +
              std::to_string(cell));
  const uint64_t n = run.kept.size() / cell;
  if (n > (uint64_t)m.n_steps)
    throw bad("kept covers " + std::to_string(n) + " steps, the trace has " + std::to_string(m.n_steps));
  if (!run.attention.empty() && run.attention.size() != n * L * H * T)
    throw bad("attention has " + std::to_string(run.attention.size()) + " values, expected " +
              std::to_string(n * L * H * T));
  if (!run.lse.empty() && run.lse.size() != n * L * H)
    throw bad("lse has " + std::to_string(run.lse.size()) + " values, expected " + std::to_string(n * L * H));
  if (run.tokens.size() > T) throw bad("more tokens (" + std::to_string(run.tokens.size()) + ") than T = " + std::to_string(T));
  std::set<std::string> seen;
  for (const NamedArray& a : run.metrics) {
    if (!plain_name(a.name)) throw bad("invalid metric name '" + a.name + "'");
    if (!seen.insert(a.name).second) throw bad("metric '" + a.name + "' given twice");
    if (a.dims.empty() || checked_product(a.dims, path, "metric " + a.name) != a.data.size())
      throw bad("metric '" + a.name + "' has " + std::to_string(a.data.size()) + " values for shape " + dims_text(a.dims));
  }
  seen.clear();
  for (const auto& [key, value] : run.scalars) {
    if (key.empty() || reserved_run_attrs().count(key)) throw bad("scalar name '" + key + "' is reserved");
    if (!seen.insert(key).second) throw bad("scalar '" + key + "' given twice");
  }
}

void write_run(hid_t file, const RunData& run, const TraceMeta& m) {
  const hsize_t L = m.shape.n_layers, H = m.shape.n_heads, Hkv = m.shape.n_kv_heads, T = m.total_len();
  const hsize_t n = run.kept.size() / (L * Hkv * T);
  const std::string g = run_group(run.name);
  h5::remove_link(file, g);
  h5::Handle group = h5::ensure_group(file, g);
  h5::write_attr(group, "policy", run.policy);
  h5::write_attr(group, "params", run.params_json);
  h5::write_attr_int(group, "budget", run.budget);
  h5::write_attr(group, "eviction", run.eviction);
  h5::write_attr(group, "mode", run.mode);
  if (!run.device.empty()) {
    h5::write_attr(group, "device", run.device);
    h5::write_attr(group, "device_dtype", run.device_dtype);
  }
  h5::write_attr(group, "text", run.text);
  h5::write_attr_int(group, "n_steps", (int64_t)n);
  for (const auto& [key, value] : run.scalars) h5::write_attr_double(group, key, value);

  h5::Layout per_step{{H5S_UNLIMITED, L, Hkv, T}, {1, L, Hkv, T}, 4};
  h5::write_dataset(file, g + "/kept", H5T_STD_U8LE, H5T_NATIVE_UINT8, {n, L, Hkv, T}, run.kept.data(), per_step);
  for (const NamedArray& a : run.metrics)
    h5::write_dataset(file, g + "/metrics/" + a.name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, hdims(a.dims), a.data.data());
  if (!run.tokens.empty())
    h5::write_dataset(file, g + "/tokens", H5T_STD_I32LE, H5T_NATIVE_INT32, {run.tokens.size()}, run.tokens.data());
  if (!run.attention.empty()) {
    h5::Layout rows{{H5S_UNLIMITED, L, H, T}, {1, L, H, T}, 1};
    h5::write_dataset(file, g + "/attention", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {n, L, H, T}, run.attention.data(), rows);
  }
  if (!run.lse.empty())
    h5::write_dataset(file, g + "/lse", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {n, L, H}, run.lse.data());
}

std::vector<std::string> run_names(hid_t file) {
  std::vector<std::string> names;
  if (!h5::is_group(file, kRuns)) return names;
  h5::Handle runs = h5::group_handle(H5Gopen2(file, kRuns, H5P_DEFAULT), kRuns);
  for (const std::string& name : h5::member_names(runs))
    if (h5::is_group(file, run_group(name))) names.push_back(name);
  return names;
}

int run_steps(hid_t file, const std::string& name, const TraceMeta& m, const SizeGuard& guard) {
  const std::string g = run_group(name);
  if (!plain_name(name) || !h5::is_group(file, g)) throw input_error(guard.path, "no run named '" + name + "'");
  const uint64_t L = m.shape.n_layers, Hkv = m.shape.n_kv_heads, T = m.total_len();
  const auto dims = expect_dims(file, g + "/kept", H5T_INTEGER, {kAnyDim, L, Hkv, T}, guard.path);
  if (dims[0] > (uint64_t)m.n_steps)
    throw input_error(guard.path, g + "/kept has " + std::to_string(dims[0]) + " steps, the trace " +
                                      std::to_string(m.n_steps));
  return (int)dims[0];
}

RunData read_run(hid_t file, const std::string& name, bool with_bulk, const TraceMeta& m, const SizeGuard& guard) {
  const int n_run = run_steps(file, name, m, guard);
  const std::string g = run_group(name);
  const uint64_t n = n_run, L = m.shape.n_layers, H = m.shape.n_heads, Hkv = m.shape.n_kv_heads, T = m.total_len();
  h5::Handle group = h5::group_handle(H5Gopen2(file, g.c_str(), H5P_DEFAULT), g);
  RunData run;
  run.name = name;
  auto text = [&](const char* attr) { return h5::has_attr(group, attr) ? h5::read_attr_string(group, attr) : std::string(); };
  run.policy = text("policy");
  run.params_json = text("params");
  run.eviction = text("eviction");
  run.mode = text("mode");
  run.device = text("device");
  run.device_dtype = text("device_dtype");
  run.text = text("text");
  if (h5::has_attr(group, "budget")) run.budget = (int)h5::read_attr_int(group, "budget");
  for (const std::string& attr : h5::attr_names(group)) {
    if (reserved_run_attrs().count(attr)) continue;
    const H5T_class_t cls = h5::attr_class(group, attr);
    if (cls == H5T_INTEGER || cls == H5T_FLOAT) run.scalars.emplace_back(attr, h5::read_attr_double(group, attr));
  }
  if (h5::is_group(file, g + "/metrics")) {
    h5::Handle metrics = h5::group_handle(H5Gopen2(file, (g + "/metrics").c_str(), H5P_DEFAULT), g + "/metrics");
    for (const std::string& metric : h5::member_names(metrics)) {
      const std::string p = g + "/metrics/" + metric;
      if (!h5::is_dataset(file, p)) continue;
      run.metrics.push_back(read_array(file, p, guard));
    }
  }
  if (h5::is_dataset(file, g + "/tokens")) {
    const auto dims = expect_dims(file, g + "/tokens", H5T_INTEGER, {kAnyDim}, guard.path);
    if (dims[0] > T) throw input_error(guard.path, g + "/tokens has more than T = " + std::to_string(T) + " entries");
    run.tokens.resize(dims[0]);
    h5::read_all(h5::open_dataset(file, g + "/tokens"), H5T_NATIVE_INT32, run.tokens.data());
  }
  if (!with_bulk) return run;
  guard.need(n * L * Hkv * T, 1, g + "/kept");
  run.kept.resize(n * L * Hkv * T);
  h5::read_all(h5::open_dataset(file, g + "/kept"), H5T_NATIVE_UINT8, run.kept.data());
  if (h5::path_exists(file, g + "/attention")) {
    expect_dims(file, g + "/attention", H5T_FLOAT, {n, L, H, T}, guard.path);
    guard.need(n * L * H * T, 4, g + "/attention");
    run.attention.resize(n * L * H * T);
    h5::read_all(h5::open_dataset(file, g + "/attention"), H5T_NATIVE_FLOAT, run.attention.data());
  }
  if (h5::path_exists(file, g + "/lse")) {
    expect_dims(file, g + "/lse", H5T_FLOAT, {n, L, H}, guard.path);
    run.lse.resize(n * L * H);
    h5::read_all(h5::open_dataset(file, g + "/lse"), H5T_NATIVE_FLOAT, run.lse.data());
  }
  return run;
}

void validate_array(const std::string& path, const NamedArray& a) {
  if (path.size() < 2 || path[0] != '/' || path.back() == '/')
    throw std::invalid_argument("array path '" + path + "' must be absolute, like /heads/alpha");
  for (const char* reserved : {"/tokens", "/attention", "/runs"})
    if (path.rfind(reserved, 0) == 0) throw std::invalid_argument("array path '" + path + "' is reserved");
  uint64_t n = 1;
  for (uint64_t d : a.dims) n *= d;
  if (a.dims.empty() || n != a.data.size())
    throw std::invalid_argument("array " + path + ": " + std::to_string(a.data.size()) + " values for shape " +
                                dims_text(a.dims));
}

void write_array(hid_t file, const std::string& path, const NamedArray& a,
                 const std::vector<std::pair<std::string, std::string>>& string_attrs) {
  h5::remove_link(file, path);
  h5::Handle ds = h5::create_dataset(file, path, H5T_IEEE_F32LE, hdims(a.dims));
  if (!a.data.empty()) h5::check(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, a.data.data()), path);
  for (const auto& [key, value] : string_attrs) h5::write_attr(ds, key, value);
  ds.close(path);
}

NamedArray read_array(hid_t file, const std::string& path, const SizeGuard& guard) {
  if (!h5::is_dataset(file, path)) throw input_error(guard.path, "missing dataset " + path);
  h5::Handle ds = h5::open_dataset(file, path);
  const H5T_class_t cls = h5::dataset_class(ds);
  if (cls != H5T_FLOAT && cls != H5T_INTEGER) throw input_error(guard.path, path + " is not numeric");
  NamedArray a;
  a.name = path.substr(path.find_last_of('/') + 1);
  const auto dims = h5::dataset_dims(ds);
  a.dims.assign(dims.begin(), dims.end());
  const uint64_t n = checked_product(a.dims, guard.path, path);
  guard.need(n, 4, path);
  a.data.resize(n);
  h5::read_all(ds, H5T_NATIVE_FLOAT, a.data.data());
  return a;
}

}  // namespace kvs::trace_schema

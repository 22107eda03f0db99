#include "framework/engine/blas/onednn_matmul.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <fmt/format.h>
#include <list>
#include <memory>
#include <mutex>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "framework/engine/blas/bf16_cpu.hpp"

namespace headgrad::blas {
namespace {

void check_dnnl(dnnl_status_t status, const char* what) {
  if (status != dnnl_success) throw std::runtime_error(fmt::format("oneDNN: {} failed (status {})", what, static_cast<int>(status)));
}

// The process's CPU engine, created on first use and never destroyed: cached primitives and
// threads' memory objects refer to it until the very end of the process.
dnnl_engine_t engine() {
  static const dnnl_engine_t e = [] {
    dnnl_engine_t created = nullptr;
    check_dnnl(dnnl_engine_create(&created, dnnl_cpu, 0), "creating the CPU engine");
    return created;
  }();
  return e;
}

// What makes two gemms the same primitive. alpha and beta are baked into the primitive's
// attributes, by their bits.
struct MatmulKey {
  std::int64_t m, n, k, lda, ldb, ldc;
  std::uint32_t alpha_bits, beta_bits;
  bool ta, tb;
  GemmInputs inputs;
  bool operator==(const MatmulKey& o) const {
    return std::tie(m, n, k, lda, ldb, ldc, alpha_bits, beta_bits, ta, tb, inputs) ==
           std::tie(o.m, o.n, o.k, o.lda, o.ldb, o.ldc, o.alpha_bits, o.beta_bits, o.ta, o.tb, o.inputs);
  }
};
struct MatmulKeyHash {
  std::size_t operator()(const MatmulKey& key) const {
    std::uint64_t h = 1469598103934665603ull; // FNV-1a over the fields
    auto mix = [&](std::uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    for (std::int64_t v : {key.m, key.n, key.k, key.lda, key.ldb, key.ldc}) mix(static_cast<std::uint64_t>(v));
    mix(key.alpha_bits);
    mix(key.beta_bits);
    mix((key.ta ? 1u : 0u) | (key.tb ? 2u : 0u) | (key.inputs == GemmInputs::bf16 ? 4u : 0u));
    return static_cast<std::size_t>(h);
  }
};

// A created primitive and the memory descriptors it executes with.
struct MatmulPrimitive {
  dnnl_primitive_t primitive = nullptr;
  dnnl_memory_desc_t a{}, b{}, c{}, scratchpad{};
  std::size_t scratchpad_bytes = 0;
  std::string implementation;
  MatmulPrimitive() = default;
  MatmulPrimitive(const MatmulPrimitive&) = delete;
  MatmulPrimitive& operator=(const MatmulPrimitive&) = delete;
  ~MatmulPrimitive() {
    if (primitive) dnnl_primitive_destroy(primitive);
  }
};

// Owns a oneDNN handle of type T, destroyed by `destroy` (the descriptor, attribute and post-op
// objects that primitive creation needs only while it runs).
template <typename T, dnnl_status_t (*destroy)(T)> struct Owned {
  T handle = nullptr;
  Owned() = default;
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() {
    if (handle) destroy(handle);
  }
};

std::shared_ptr<const MatmulPrimitive> create_primitive(const MatmulKey& key) {
  if (key.inputs == GemmInputs::bf16) {
    const std::string missing = bf16_missing();
    if (!missing.empty()) throw std::runtime_error(missing);
  }
  const dnnl_data_type_t in_type = key.inputs == GemmInputs::bf16 ? dnnl_bf16 : dnnl_f32;
  // op(A) (m x k): row r, column j at a[r lda + j], or a[j lda + r] when A is stored transposed.
  const dnnl_dims_t a_dims = {key.m, key.k}, a_strides = {key.ta ? 1 : key.lda, key.ta ? key.lda : 1};
  const dnnl_dims_t b_dims = {key.k, key.n}, b_strides = {key.tb ? 1 : key.ldb, key.tb ? key.ldb : 1};
  const dnnl_dims_t c_dims = {key.m, key.n}, c_strides = {key.ldc, 1};
  dnnl_memory_desc_t a_md, b_md, c_md;
  check_dnnl(dnnl_memory_desc_init_by_strides(&a_md, 2, a_dims, in_type, a_strides), "describing A");
  check_dnnl(dnnl_memory_desc_init_by_strides(&b_md, 2, b_dims, in_type, b_strides), "describing B");
  check_dnnl(dnnl_memory_desc_init_by_strides(&c_md, 2, c_dims, dnnl_f32, c_strides), "describing C");
  dnnl_matmul_desc_t desc;
  check_dnnl(dnnl_matmul_desc_init(&desc, &a_md, &b_md, nullptr, &c_md), "describing the matmul");

  Owned<dnnl_primitive_attr_t, dnnl_primitive_attr_destroy> attr;
  check_dnnl(dnnl_primitive_attr_create(&attr.handle), "creating attributes");
  check_dnnl(dnnl_primitive_attr_set_scratchpad_mode(attr.handle, dnnl_scratchpad_mode_user), "the scratchpad mode");
  const float alpha = std::bit_cast<float>(key.alpha_bits), beta = std::bit_cast<float>(key.beta_bits);
  if (alpha != 1.0f) check_dnnl(dnnl_primitive_attr_set_output_scales(attr.handle, 1, 0, &alpha), "alpha as an output scale");
  if (beta != 0.0f) {
    Owned<dnnl_post_ops_t, dnnl_post_ops_destroy> post_ops;
    check_dnnl(dnnl_post_ops_create(&post_ops.handle), "creating post-ops");
    check_dnnl(dnnl_post_ops_append_sum(post_ops.handle, beta), "beta as a sum post-op");
    check_dnnl(dnnl_primitive_attr_set_post_ops(attr.handle, post_ops.handle), "setting post-ops");
  }
  Owned<dnnl_primitive_desc_t, dnnl_primitive_desc_destroy> pd;
  const dnnl_status_t made = dnnl_primitive_desc_create(&pd.handle, &desc, attr.handle, engine(), nullptr);
  if (made != dnnl_success)
    throw std::runtime_error(fmt::format("oneDNN has no {} matmul for {}{} {}x{}x{} (lda {}, ldb {}, ldc {}): status {}",
                                         gemm_inputs_name(key.inputs), key.ta ? 'T' : 'N', key.tb ? 'T' : 'N', key.m,
                                         key.n, key.k, key.lda, key.ldb, key.ldc, static_cast<int>(made)));
  auto p = std::make_shared<MatmulPrimitive>();
  p->a = a_md;
  p->b = b_md;
  p->c = c_md;
  p->scratchpad = *dnnl_primitive_desc_query_md(pd.handle, dnnl_query_scratchpad_md, 0);
  p->scratchpad_bytes = dnnl_memory_desc_get_size(&p->scratchpad);
  const char* impl = nullptr;
  check_dnnl(dnnl_primitive_desc_query(pd.handle, dnnl_query_impl_info_str, 0, &impl), "querying the implementation");
  p->implementation = impl ? impl : "?";
  check_dnnl(dnnl_primitive_create(&p->primitive, pd.handle), "creating the matmul primitive");
  return p;
}

// The process's primitives: least recently used first out past kOnednnCacheCapacity. Shared by
// all threads (executing one primitive from several threads at once is allowed: each brings its
// own memory objects and scratchpad). Never destroyed, like the engine.
class PrimitiveCache {
public:
  std::shared_ptr<const MatmulPrimitive> get(const MatmulKey& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      reused_.fetch_add(1, std::memory_order_relaxed);
      return it->second->second;
    }
    auto p = create_primitive(key); // under the lock: a second thread wanting it waits, then reuses it
    created_.fetch_add(1, std::memory_order_relaxed);
    lru_.emplace_front(key, p);
    index_[key] = lru_.begin();
    if (static_cast<std::int64_t>(lru_.size()) > kOnednnCacheCapacity) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
    return p;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    index_.clear();
    lru_.clear();
    generation_.fetch_add(1, std::memory_order_relaxed);
  }
  void note_reuse() { reused_.fetch_add(1, std::memory_order_relaxed); }
  int generation() const { return generation_.load(std::memory_order_relaxed); }
  OnednnCacheStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {created_.load(), reused_.load(), static_cast<std::int64_t>(lru_.size())};
  }

private:
  std::mutex mutex_;
  std::list<std::pair<MatmulKey, std::shared_ptr<const MatmulPrimitive>>> lru_;
  std::unordered_map<MatmulKey, decltype(lru_)::iterator, MatmulKeyHash> index_;
  std::atomic<std::int64_t> created_{0}, reused_{0};
  std::atomic<int> generation_{0};
};
PrimitiveCache& primitive_cache() {
  static PrimitiveCache* cache = new PrimitiveCache; // never destroyed (see engine())
  return *cache;
}

// A primitive with this thread's four memory objects for it (A, B, C, scratchpad), whose data
// pointers each call sets: creating four memory objects in every call costs as much as a small
// gemm (headgrad_gemm_bench's small shapes show the call overhead).
struct BoundPrimitive {
  std::shared_ptr<const MatmulPrimitive> p;
  dnnl_memory_t memory[4] = {nullptr, nullptr, nullptr, nullptr};
  explicit BoundPrimitive(std::shared_ptr<const MatmulPrimitive> primitive) : p(std::move(primitive)) {
    const dnnl_memory_desc_t* mds[4] = {&p->a, &p->b, &p->c, &p->scratchpad};
    for (int i = 0; i < 4; ++i) check_dnnl(dnnl_memory_create(&memory[i], mds[i], engine(), DNNL_MEMORY_NONE), "creating a memory object");
  }
  BoundPrimitive(const BoundPrimitive&) = delete;
  BoundPrimitive& operator=(const BoundPrimitive&) = delete;
  ~BoundPrimitive() {
    for (dnnl_memory_t m : memory)
      if (m) dnnl_memory_destroy(m);
  }
};

// What each thread keeps: its stream, its bound primitives (looked up without a lock), its
// scratchpad and the bf16 copies of float inputs. Cleared when the process cache is, and when
// it holds kOnednnCacheCapacity primitives.
struct ThreadState {
  dnnl_stream_t stream = nullptr;
  std::unordered_map<MatmulKey, std::unique_ptr<BoundPrimitive>, MatmulKeyHash> bound;
  int generation = -1;
  std::unique_ptr<std::byte, decltype(&std::free)> scratchpad{nullptr, &std::free};
  std::size_t scratchpad_bytes = 0;
  std::vector<bf16> a16, b16;

  ThreadState() { check_dnnl(dnnl_stream_create(&stream, engine(), dnnl_stream_default_flags), "creating a stream"); }
  ThreadState(const ThreadState&) = delete;
  ThreadState& operator=(const ThreadState&) = delete;
  ~ThreadState() {
    bound.clear();
    if (stream) dnnl_stream_destroy(stream);
  }

  BoundPrimitive& get(const MatmulKey& key) {
    PrimitiveCache& cache = primitive_cache();
    if (generation != cache.generation() || static_cast<std::int64_t>(bound.size()) >= kOnednnCacheCapacity) {
      bound.clear();
      generation = cache.generation();
    }
    if (auto it = bound.find(key); it != bound.end()) {
      cache.note_reuse();
      return *it->second;
    }
    return *bound.emplace(key, std::make_unique<BoundPrimitive>(cache.get(key))).first->second;
  }
  std::byte* scratch(std::size_t bytes) {
    if (bytes > scratchpad_bytes) {
      const std::size_t rounded = (bytes + 4095) / 4096 * 4096; // aligned_alloc: a multiple of the alignment
      scratchpad.reset(static_cast<std::byte*>(std::aligned_alloc(4096, rounded)));
      if (!scratchpad) throw std::bad_alloc();
      scratchpad_bytes = rounded;
    }
    return scratchpad.get();
  }
};
ThreadState& thread_state() {
  thread_local ThreadState state;
  return state;
}

// oneDNN runs on one thread while this lives: its parallel sections take omp_get_max_threads()
// threads when not already inside an OpenMP region, and that is what it plans a primitive for
// when creating it too. A training thread (runtime::SpinPool) already has 1.
class OneOnednnThread {
public:
  OneOnednnThread() : before_(omp_get_max_threads()) {
    if (before_ != 1) omp_set_num_threads(1);
  }
  ~OneOnednnThread() {
    if (before_ != 1) omp_set_num_threads(before_);
  }
  OneOnednnThread(const OneOnednnThread&) = delete;
  OneOnednnThread& operator=(const OneOnednnThread&) = delete;

private:
  int before_;
};

// C = beta C for an empty sum (k = 0); beta 0 assigns zeros, whatever C held.
void scale_c(float* c, std::int64_t ldc, std::int64_t m, std::int64_t n, float beta) {
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
}

void check_sizes(const char* fn, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t lda,
                 std::int64_t ldb, std::int64_t ldc) {
  const std::int64_t a_width = ta ? m : k, b_width = tb ? k : n;
  if (m < 0 || n < 0 || k < 0 || lda < std::max<std::int64_t>(1, a_width) || ldb < std::max<std::int64_t>(1, b_width) ||
      ldc < std::max<std::int64_t>(1, n))
    throw std::invalid_argument(fmt::format("{}: {}{} m {} n {} k {} with lda {} ldb {} ldc {} (each leading dimension "
                                            "must be at least its operand's stored width, and at least 1)",
                                            fn, ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, lda, ldb, ldc));
}

MatmulKey key_of(GemmInputs inputs, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                 std::int64_t lda, std::int64_t ldb, float beta, std::int64_t ldc) {
  return MatmulKey{m, n, k, lda, ldb, ldc, std::bit_cast<std::uint32_t>(alpha), std::bit_cast<std::uint32_t>(beta), ta, tb,
                   inputs};
}

void run_matmul(const MatmulKey& key, const void* a, const void* b, float* c) {
  OneOnednnThread one_thread;
  ThreadState& state = thread_state();
  BoundPrimitive& bound = state.get(key);
  void* data[4] = {const_cast<void*>(a), const_cast<void*>(b), c, state.scratch(bound.p->scratchpad_bytes)};
  for (int i = 0; i < 4; ++i)
    check_dnnl(dnnl_memory_set_data_handle_v2(bound.memory[i], data[i], state.stream), "setting a data pointer");
  const dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, bound.memory[0]},
                                   {DNNL_ARG_WEIGHTS, bound.memory[1]},
                                   {DNNL_ARG_DST, bound.memory[2]},
                                   {DNNL_ARG_SCRATCHPAD, bound.memory[3]}};
  check_dnnl(dnnl_primitive_execute(bound.p->primitive, state.stream, 4, args), "executing the matmul");
  check_dnnl(dnnl_stream_wait(state.stream), "waiting for the matmul");
}

// The checks and the empty cases every entry point shares; false when nothing is left to do.
bool prepare(const char* fn, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t lda,
             std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  check_sizes(fn, ta, tb, m, n, k, lda, ldb, ldc);
  if (m == 0 || n == 0) return false;
  if (k == 0) {
    scale_c(c, ldc, m, n, beta);
    return false;
  }
  return true;
}

} // namespace

const char* gemm_inputs_name(GemmInputs inputs) { return inputs == GemmInputs::bf16 ? "bf16" : "f32"; }

void onednn_sgemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                  std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (!prepare("onednn_sgemm", ta, tb, m, n, k, lda, ldb, beta, c, ldc)) return;
  run_matmul(key_of(GemmInputs::f32, ta, tb, m, n, k, alpha, lda, ldb, beta, ldc), a, b, c);
}

void onednn_bf16_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                      const bf16* a, std::int64_t lda, const bf16* b, std::int64_t ldb, float beta, float* c,
                      std::int64_t ldc) {
  if (!prepare("onednn_bf16_gemm", ta, tb, m, n, k, lda, ldb, beta, c, ldc)) return;
  run_matmul(key_of(GemmInputs::bf16, ta, tb, m, n, k, alpha, lda, ldb, beta, ldc), a, b, c);
}

void onednn_bf16_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                      std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (!prepare("onednn_bf16_gemm", ta, tb, m, n, k, lda, ldb, beta, c, ldc)) return;
  // The stored operands (A is k x m when transposed, B n x k), packed: the leading dimension
  // becomes the stored width.
  const std::int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
  ThreadState& state = thread_state();
  state.a16.resize(static_cast<std::size_t>(a_rows * a_cols));
  state.b16.resize(static_cast<std::size_t>(b_rows * b_cols));
  to_bf16(state.a16.data(), a_cols, a, lda, a_rows, a_cols);
  to_bf16(state.b16.data(), b_cols, b, ldb, b_rows, b_cols);
  run_matmul(key_of(GemmInputs::bf16, ta, tb, m, n, k, alpha, a_cols, b_cols, beta, ldc), state.a16.data(),
             state.b16.data(), c);
}

std::string onednn_implementation(GemmInputs inputs, bool ta, bool tb, std::int64_t m, std::int64_t n,
                                  std::int64_t k, std::int64_t lda, std::int64_t ldb, std::int64_t ldc) {
  check_sizes("onednn_implementation", ta, tb, m, n, k, lda, ldb, ldc);
  OneOnednnThread one_thread;
  return thread_state().get(key_of(inputs, ta, tb, m, n, k, 1.0f, lda, ldb, 0.0f, ldc)).p->implementation;
}

OnednnCacheStats onednn_cache_stats() { return primitive_cache().stats(); }

void onednn_clear_cache(bool library_cache_too) {
  primitive_cache().clear();
  thread_state().bound.clear();
  if (library_cache_too) {
    int capacity = 0;
    check_dnnl(dnnl_get_primitive_cache_capacity(&capacity), "reading the primitive cache capacity");
    check_dnnl(dnnl_set_primitive_cache_capacity(0), "clearing oneDNN's primitive cache");
    check_dnnl(dnnl_set_primitive_cache_capacity(capacity), "restoring oneDNN's primitive cache capacity");
  }
}

} // namespace headgrad::blas

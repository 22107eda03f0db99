// kernels.hpp - the seam between the book (framework/core, ops, nn, optim, models) and the engine
// (framework/engine): the one engine header a book file may include. It includes nothing of the
// book, and holds
//   - the list of kernels (HEADGRAD_ISA_KERNELS, HEADGRAD_ONCE_KERNELS), from which it makes the
//     entry points the ops call (kernels::NAME<T>), the declarations of the book's plain loops
//     (book::NAME<T>) and the table of function pointers the entry points go through;
//   - the plain data the kernels' arguments carry (HeadsLayout, KeptKeys, ...);
//   - the engine's services to the book: parallel_for, allocation, the profiler's timers, and the
//     switch to reference mode.
//
// Reference mode: the book runs alone. Every kernel entry point runs the plain loop kept beside
// its op in the book (book::NAME<T>), parallel_for runs on the calling thread, storage comes from
// plain aligned allocation (no caching allocator), and the engine's thread pools stay idle. It is
// on from the start when the environment holds HEADGRAD_REFERENCE=1, and a program or test
// switches it with runtime::set_reference() (tests run fast and reference mode in one process).
//
// Adding a kernel: one line in a list below, its engine body (framework/engine/kernels/), its book
// loop beside the op that calls it (HEADGRAD_BOOK_LOOP), and its case in tests/test_kernel_table.cpp.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace headgrad::runtime {
namespace detail {
bool reference_from_environment(); // HEADGRAD_REFERENCE set, and neither "" nor "0"
// The switch, read at first use, so that a static initialiser asking early sees the environment too.
inline std::atomic<bool>& reference_flag() {
  static std::atomic<bool> on{reference_from_environment()};
  return on;
}
} // namespace detail

// Whether reference mode is on (see above). One relaxed atomic load.
inline bool reference() { return detail::reference_flag().load(std::memory_order_relaxed); }
// Turns reference mode on or off for every thread of the process. Call it between steps, not
// while a kernel runs.
inline void set_reference(bool on) { detail::reference_flag().store(on, std::memory_order_relaxed); }

// The matmul precision: what the float32 gemms of linear layers (kernels::gemm<float>, which
// ops::linear and its fused forms call) multiply in. f32 (the default): float32. bf16: their
// inputs rounded to bfloat16 (nearest, ties to even), the products accumulated and written in
// float32 (oneDNN's matmul: framework/engine/blas/). torch.matmul's gemms (kernels::matmul_*),
// attention's, every other kernel and everything in double stay as they are. One setting for the
// whole process, like set_reference; runtime::Autocast (framework/engine/autocast.hpp) sets it
// for a scope and rounds a model's weights once on entry. set_matmul_precision(bf16) throws
// std::logic_error in reference mode (the book's loops multiply in float32) and
// std::runtime_error, naming what is missing, on a CPU without bf16 instructions.
enum class MatmulPrecision { f32, bf16 };
namespace detail {
inline std::atomic<MatmulPrecision>& matmul_precision_flag() {
  static std::atomic<MatmulPrecision> precision{MatmulPrecision::f32};
  return precision;
}
} // namespace detail
inline MatmulPrecision matmul_precision() { return detail::matmul_precision_flag().load(std::memory_order_relaxed); }
void set_matmul_precision(MatmulPrecision precision); // (framework/engine/blas/linear_gemm.cpp)
const char* matmul_precision_name(MatmulPrecision precision); // "float32", "bf16"

} // namespace headgrad::runtime

namespace headgrad::kernels {

// ---- the data the kernels' arguments carry -------------------------------------------------------

// The two forms of GELU (torch.nn.functional.gelu's approximate = 'none' | 'tanh').
enum class GeluForm { erf, tanh };

// Where the heads of multi-head attention live. Each of Q, K, V, O (and their gradients, which
// share the layout) is a (B, T, ...) buffer: element (b, t, h*dh + c) at b*batch_stride +
// t*row_stride + h*dh + c - head h of a (B, T, H*dh) buffer is the T x dh matrix at column h*dh,
// so d2l's transpose_qkv is a stride, not a copy.
struct HeadsLayout {
  std::int64_t B = 0, H = 0, Tq = 0, Tk = 0, dh = 0;
  std::int64_t q_row = 0, k_row = 0, v_row = 0, o_row = 0;       // row strides
  std::int64_t q_batch = 0, k_batch = 0, v_batch = 0, o_batch = 0; // batch strides
};

// Which keys each query row keeps: keys j < lens[b*Tq + i] (lens null: all) and keep[(b*Tq + i)*Tk
// + j] != 0 (keep null: all), or keep[((b*H + h)*Tq + i)*Tk + j] != 0 for head h when
// keep_per_head. Lengths are the same for every head. A row that keeps nothing outputs zeros and
// passes no gradient; a row whose kept scores hold a NaN or +inf outputs NaN (its weights are NaN on
// every key, as PyTorch's softmax after masked_fill(-inf)).
struct KeptKeys {
  const std::int64_t* lens = nullptr;
  const std::uint8_t* keep = nullptr;
  bool keep_per_head = false;
};

// Dropout on the attention weights before they multiply V (d2l's DotProductAttention:
// dropout(P) V): A = P F with F = keep ? scale : 0 per weight, keep (B, H, Tq, Tk) the flags (1
// keeps) and scale = 1 / (1 - p); keep null: no dropout (A = P). P itself stays undropped. F is
// formed and multiplied in T as ops::dropout_with_mask does (mask * scale, then x * that).
struct WeightsDropout {
  const std::uint8_t* keep = nullptr;
  double scale = 1;
};

// The scalars of one parameter's Adam / AdamW step, rounded to T (see optim::Adam::step).
template <typename T> struct AdamScalars {
  T b1, b2, one_minus_b1, one_minus_b2, eps, wd, step_size, bc2_sqrt, decay;
  T sign; // -1 with maximize: grad = -grad (exact, as the negation)
  bool decoupled;
  T grad_scale = 1; // the gradient is read times this (clipping folded in: the product clip_grad_norm would store)
};

// The operands of torch.matmul's A (..., M, K) @ B (..., K, N): each at least 2-D, batch dims
// broadcast, as shapes and strides (in elements).
inline constexpr int kMatmulMaxRank = 8;
struct MatmulShapes {
  int a_rank = 0, b_rank = 0;
  std::int64_t a_shape[kMatmulMaxRank] = {}, a_strides[kMatmulMaxRank] = {};
  std::int64_t b_shape[kMatmulMaxRank] = {}, b_strides[kMatmulMaxRank] = {};
};

// ---- the list ---------------------------------------------------------------------------------
// X(return type, name, (parameters, in terms of the float type T), (argument names)).
// Outputs first (a gradient's with its first_write flag: assign instead of add, autograd.hpp), then
// inputs, then sizes. The comment above each book loop says what its kernel computes.

// Compiled once per instruction set (framework/engine/kernels/isa/): the row kernels, attention,
// the Adam update and the vector math.
#define HEADGRAD_ISA_KERNELS(X)                                                                                        \
  X(void, softmax_forward, (T* y, const T* x, const std::int64_t* lens, const std::uint8_t* keep, std::int64_t rows,   \
                            std::int64_t cols), (y, x, lens, keep, rows, cols))                                        \
  X(void, softmax_backward, (T* dx, bool first_write, const T* dy, const T* y, const std::int64_t* lens,               \
                             const std::uint8_t* keep, std::int64_t rows, std::int64_t cols),                          \
    (dx, first_write, dy, y, lens, keep, rows, cols))                                                                  \
  X(void, layer_norm_forward, (T* y, T* stats, const T* x, const T* w, const T* b, std::int64_t rows, std::int64_t D,  \
                               T eps), (y, stats, x, w, b, rows, D, eps))                                              \
  X(void, add_layer_norm_forward, (T* y, T* s, T* stats, const T* a, const T* b, const T* w, const T* bias,            \
                                   std::int64_t rows, std::int64_t D, T eps),                                          \
    (y, s, stats, a, b, w, bias, rows, D, eps))                                                                        \
  X(void, layer_norm_backward, (T* dx, bool dx_first, T* dw, bool dw_first, T* db, bool db_first, const T* dy,         \
                                const T* x, const T* w, const T* stats, std::int64_t rows, std::int64_t D),            \
    (dx, dx_first, dw, dw_first, db, db_first, dy, x, w, stats, rows, D))                                              \
  X(double, cross_entropy_forward, (T* probs, T* row_loss, const T* x, const std::int64_t* target,                     \
                                    const double* weight, std::int64_t rows, std::int64_t V),                          \
    (probs, row_loss, x, target, weight, rows, V))                                                                     \
  X(void, cross_entropy_backward, (T* dx, bool first_write, const T* probs, const std::int64_t* target,                \
                                   const T* row_scale, std::int64_t rows, std::int64_t V),                             \
    (dx, first_write, probs, target, row_scale, rows, V))                                                              \
  X(void, fill_rows, (T* y, const T* b, std::int64_t rows, std::int64_t cols), (y, b, rows, cols))                     \
  X(void, add_rows, (T* y, const T* res, const T* b, std::int64_t rows, std::int64_t cols), (y, res, b, rows, cols))   \
  X(void, column_sums, (T* out, bool first_write, const T* x, std::int64_t rows, std::int64_t cols),                   \
    (out, first_write, x, rows, cols))                                                                                 \
  X(void, attention_forward, (T* o, T* p, const T* q, const T* k, const T* v, const HeadsLayout& L,                    \
                              const KeptKeys& kept, T scale, const WeightsDropout& drop),                              \
    (o, p, q, k, v, L, kept, scale, drop))                                                                             \
  X(void, attention_backward, (T* dq, bool dq_first, T* dk, bool dk_first, T* dv, bool dv_first, const T* dout,        \
                               const T* p, const T* q, const T* k, const T* v, const HeadsLayout& L, T scale,          \
                               const KeptKeys& kept, const WeightsDropout& drop),                                      \
    (dq, dq_first, dk, dk_first, dv, dv_first, dout, p, q, k, v, L, scale, kept, drop))                                \
  X(void, flash_attention_forward, (T* o, T* lse, const T* q, const T* k, const T* v, const HeadsLayout& L,            \
                                    const KeptKeys& kept, T scale), (o, lse, q, k, v, L, kept, scale))                 \
  X(void, flash_attention_backward, (T* dq, bool dq_first, T* dk, bool dk_first, T* dv, bool dv_first,                 \
                                     const T* dout, const T* o, const T* lse, const T* q, const T* k, const T* v,      \
                                     const HeadsLayout& L, const KeptKeys& kept, T scale),                             \
    (dq, dq_first, dk, dk_first, dv, dv_first, dout, o, lse, q, k, v, L, kept, scale))                                 \
  X(void, adam_update, (T* w, const T* gr, T* m, T* v, T* vmax, std::int64_t n, const AdamScalars<T>& c),              \
    (w, gr, m, v, vmax, n, c))                                                                                         \
  X(void, exp_n, (T* y, const T* x, std::int64_t n), (y, x, n))                                                        \
  X(void, log_n, (T* y, const T* x, std::int64_t n), (y, x, n))                                                        \
  X(void, tanh_n, (T* y, const T* x, std::int64_t n), (y, x, n))                                                       \
  X(void, gelu_rows, (T* y, T* dydu, const T* z, const T* bias, std::int64_t rows, std::int64_t cols, GeluForm form),  \
    (y, dydu, z, bias, rows, cols, form))

// Compiled once: BLAS's gemm, torch.matmul's products and gradients as gemms (transpose flags
// instead of copies, broadcast batches), and the gradient norm's sums of squares (their order of
// additions is the engine's, on every instruction set).
#define HEADGRAD_ONCE_KERNELS(X)                                                                                       \
  X(void, gemm, (bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,                \
                 std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc),                      \
    (ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))                                                            \
  X(void, matmul_forward, (T* c, const T* a, const T* b, const MatmulShapes& s, T alpha), (c, a, b, s, alpha))         \
  X(void, matmul_backward_a, (T* da, bool first_write, const T* dc, const T* b, const MatmulShapes& s, T alpha),       \
    (da, first_write, dc, b, s, alpha))                                                                                \
  X(void, matmul_backward_b, (T* db, bool first_write, const T* a, const T* dc, const MatmulShapes& s, T alpha),       \
    (db, first_write, a, dc, s, alpha))                                                                                \
  X(double, square_sum, (const T* x, std::int64_t n), (x, n))

#define HEADGRAD_KERNELS(X) HEADGRAD_ISA_KERNELS(X) HEADGRAD_ONCE_KERNELS(X)

// ---- what the list makes ----------------------------------------------------------------------
// NAME_fn<T>: the function type of kernel NAME.
#define HEADGRAD_KERNEL_TYPE(RET, NAME, PARAMS, ARGS) template <typename T> using NAME##_fn = RET PARAMS;
HEADGRAD_KERNELS(HEADGRAD_KERNEL_TYPE)
#undef HEADGRAD_KERNEL_TYPE

// One pointer per kernel, for one float type.
template <typename T> struct KernelSet {
#define HEADGRAD_KERNEL_FIELD(RET, NAME, PARAMS, ARGS) NAME##_fn<T>* NAME = nullptr;
  HEADGRAD_KERNELS(HEADGRAD_KERNEL_FIELD)
#undef HEADGRAD_KERNEL_FIELD
};

struct KernelTable {
  KernelSet<float> f32;
  KernelSet<double> f64;
  template <typename T> const KernelSet<T>& of() const {
    if constexpr (sizeof(T) == 4) return f32;
    else return f64;
  }
};

// The table of the engine's kernels: the copy built for runtime::active_isa() (HEADGRAD_ISA).
const KernelTable& engine_table();

// The table of the book's loops (below; the loops beside their ops): what reference mode runs.
inline const KernelTable& book_table();

// The table the entry points call through: the engine's, or in reference mode the book's (so a
// learner stepping into kernels::NAME lands here, then in the book's loop).
inline const KernelTable& kernel_table() { return runtime::reference() ? book_table() : engine_table(); }

// The entry points: kernels::NAME<T>(...) runs the active table's NAME.
#define HEADGRAD_KERNEL_ENTRY(RET, NAME, PARAMS, ARGS)                                                                 \
  template <typename T> inline RET NAME PARAMS { return kernel_table().of<T>().NAME ARGS; }
HEADGRAD_KERNELS(HEADGRAD_KERNEL_ENTRY)
#undef HEADGRAD_KERNEL_ENTRY

// ---- the engine's policies ----------------------------------------------------------------------
// Whether attention of Tq x Tk scores per head of size dh keeps only O and each row's log-sum-exp
// (the flash kernels) rather than the weights P. Always false in reference mode.
bool flash_attention_pays(std::int64_t Tq, std::int64_t Tk, std::int64_t dh);

// ---- threads ----------------------------------------------------------------------------------
// A loop is split over the threads once its work reaches kParallelWork simple operations (2^18,
// 1 MiB of floats added once). Waking a sleeping OpenMP thread (OMP_WAIT_POLICY=PASSIVE) costs
// tens of microseconds, a pass of 2^18 adds about as much.
inline constexpr std::int64_t kParallelWork = std::int64_t{1} << 18;

// Runs body(begin, end) over contiguous slices of [0, n) on the engine's threads (OpenMP, one slice
// each). parallel_for's threaded half.
void run_slices(std::int64_t n, void (*slice)(const void* body, std::int64_t begin, std::int64_t end),
                const void* body);

// body(begin, end) over [0, n): one call on this thread, or slices over the threads when the work
// (n items of about `cost` simple operations each: 1 for an add or a copy, 8 for an exp) is worth
// them and reference mode is off. The slices cover [0, n) once, so a loop whose items do not depend
// on each other gives the same bits either way.
template <typename F> void parallel_for(std::int64_t n, std::int64_t cost, const F& body) {
  if (n * cost < kParallelWork || runtime::reference()) {
    body(std::int64_t{0}, n);
    return;
  }
  run_slices(n, [](const void* f, std::int64_t b, std::int64_t e) { (*static_cast<const F*>(f))(b, e); }, &body);
}

// task(i) for i in [0, count), spread over the threads of the calling thread's pool (a training
// step's workers, kept awake) or OpenMP's when count > 1 and `work` operations of about `cost` each
// are worth them; on this thread otherwise and in reference mode. task must not throw.
void parallel_tasks(std::int64_t count, std::int64_t work, std::int64_t cost,
                    const std::function<void(std::int64_t)>& task);

// An elementwise update of several buffers as one parallel loop: buffer j's elements [0, sizes[j])
// cut into chunks, all the chunks of all the buffers shared over the threads (parallel_tasks);
// update(j, begin, end) does one chunk. How the chunks fall changes no bit of an update that treats
// each element on its own.
void parallel_chunks(const std::vector<std::int64_t>& sizes, std::int64_t cost,
                     const std::function<void(std::size_t, std::int64_t, std::int64_t)>& update);

// ---- memory -----------------------------------------------------------------------------------
// A block of bytes for a tensor's storage: 64-byte aligned, uninitialised, at least the bytes
// asked for. It remembers where it came from (the engine's caching allocator, or plain allocation
// in reference mode), so release() is right whichever mode is on by then.
struct Block {
  void* data = nullptr;
  std::size_t capacity = 0;
  int owner = -1; // the thread that drew it from the cache; -1: plain allocation
};
Block allocate(std::size_t nbytes); // std::bad_alloc when there is no memory
void release(const Block& block);

} // namespace headgrad::kernels

// ---- the book's loops: one per kernel, defined beside the op that calls it -----------------------
namespace headgrad::book {
using kernels::AdamScalars; // (the list's parameter types, by their names there)
using kernels::GeluForm;
using kernels::HeadsLayout;
using kernels::KeptKeys;
using kernels::MatmulShapes;
using kernels::WeightsDropout;
#define HEADGRAD_BOOK_DECLARATION(RET, NAME, PARAMS, ARGS) template <typename T> RET NAME PARAMS;
HEADGRAD_KERNELS(HEADGRAD_BOOK_DECLARATION)
#undef HEADGRAD_BOOK_DECLARATION
} // namespace headgrad::book

namespace headgrad::kernels {
// Every entry the book's loop (&book::NAME<T>).
template <typename T> KernelSet<T> book_loops() {
  KernelSet<T> set;
#define HEADGRAD_SET_BOOK_LOOP(RET, NAME, PARAMS, ARGS) set.NAME = &book::NAME<T>;
  HEADGRAD_KERNELS(HEADGRAD_SET_BOOK_LOOP)
#undef HEADGRAD_SET_BOOK_LOOP
  return set;
}
inline const KernelTable& book_table() {
  static const KernelTable table{book_loops<float>(), book_loops<double>()};
  return table;
}
} // namespace headgrad::kernels

// In namespace headgrad::book, after the loop's definition: its float and double instances, which
// the reference table and the kernel tests call.
#define HEADGRAD_BOOK_LOOP(NAME)                                                                                       \
  template ::headgrad::kernels::NAME##_fn<float> NAME<float>;                                                          \
  template ::headgrad::kernels::NAME##_fn<double> NAME<double>

// ---- the profiler's timers (framework/engine/profiler.hpp has the rest) --------------------------
namespace headgrad {

namespace detail {
inline std::atomic<bool> profiler_on{false}; // profiler_enable (framework/engine/profiler.hpp) sets it
} // namespace detail

// Times its scope as `name`'s forward (or backward) when the profiler is on (a disabled timer costs
// one branch). Only the outermost running timer counts, so an op that calls other ops is charged
// once, under its own name.
class OpTimer {
public:
  explicit OpTimer(const char* name, bool backward = false) : name_(name), backward_(backward) {
    if (detail::profiler_on.load(std::memory_order_relaxed)) enter();
  }
  ~OpTimer() {
    if (entered_) leave();
  }
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

private:
  void enter(); // (framework/engine/profiler.cpp)
  void leave();
  const char* name_;
  bool backward_;
  bool entered_ = false; // the profiler was on when it started
  bool counts_ = false;  // and no other timer was running on this thread
  double start_ = 0;
  double parts_at_start_ = 0; // OpPart time on this thread when it started (subtracted at the end)
};

// Inside a counted OpTimer: charges its scope to `name` instead, and takes that time off the
// enclosing op, so a fused op's parts show under the ops they stand for (linear_gelu's GELU pass
// under "gelu", its gemms under "linear_gelu"). Counts nothing outside a counted timer.
class OpPart {
public:
  explicit OpPart(const char* name, bool backward = false) : name_(name), backward_(backward) {
    if (detail::profiler_on.load(std::memory_order_relaxed)) enter();
  }
  ~OpPart() {
    if (counts_) leave();
  }
  OpPart(const OpPart&) = delete;
  OpPart& operator=(const OpPart&) = delete;

private:
  void enter();
  void leave();
  const char* name_;
  bool backward_;
  bool counts_ = false;
  double start_ = 0;
};

} // namespace headgrad

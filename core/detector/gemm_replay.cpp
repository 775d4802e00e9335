// SPDX-License-Identifier: MIT
// A GEMM's operands kept for the detector (gemmBound), and the elementwise formats' replays of them.
#include "core/detector/gemm_replay.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "core/detector/rules.h"

namespace peat::detector {

namespace {

// GCC's vector types: each operation is the lanes' own IEEE operation (and nothing is contracted,
// -ffp-contract=off), so a lane sums exactly as a scalar loop does.
typedef float Float8 __attribute__((vector_size(32)));
typedef double Double4 __attribute__((vector_size(32)));

// The rows of a GEMM side by side in vector lanes: out[r n + j] = sum over q, in q order from 0, of
// aT[q R + r] * b[q n + j] (|b[q n + j]| where AbsB), for r < rows; aT holds R rows of a transposed
// (lanes past `rows` are zero and not stored). Each lane sums its row as a scalar loop would (the
// products rounded alone, added in q order to a sum that starts at 0), the same bits whatever R is,
// and a GEMM with few columns (a conv's 6 or 16 channels) still fills the vectors.
template <typename V, typename T, int R, bool AbsB>
inline __attribute__((always_inline)) void lanesGemm(T* out, int rows, const T* aT, const float* b, int64_t k, int64_t n) {
  constexpr int64_t J = 8;
  for (int64_t j0 = 0; j0 < n; j0 += J) {
    const int64_t width = std::min<int64_t>(J, n - j0);
    V acc[J];
    for (int64_t jj = 0; jj < J; ++jj) acc[jj] = V{};
    if (width == J) {
      for (int64_t q = 0; q < k; ++q) {
        V av;
        std::memcpy(&av, aT + q * R, sizeof(V));
        const float* br = b + q * n + j0;
        for (int64_t jj = 0; jj < J; ++jj) acc[jj] += av * T(AbsB ? std::fabs(br[jj]) : br[jj]);
      }
    } else {
      for (int64_t q = 0; q < k; ++q) {
        V av;
        std::memcpy(&av, aT + q * R, sizeof(V));
        const float* br = b + q * n + j0;
        for (int64_t jj = 0; jj < width; ++jj) acc[jj] += av * T(AbsB ? std::fabs(br[jj]) : br[jj]);
      }
    }
    for (int64_t jj = 0; jj < width; ++jj)
      for (int r = 0; r < rows; ++r) out[r * n + j0 + jj] = acc[jj][r];
  }
}

constexpr int kFloatLanes = 8, kDoubleLanes = 4;

typedef uint32_t Bits8 __attribute__((vector_size(32)));

// The kernels for this CPU's vectors (AVX2 where it has them; the same bits either way).
__attribute__((target_clones("avx2", "default"))) void floatRows(float* out, int rows, const float* aT, const float* b,
                                                                 int64_t k, int64_t n, bool absB) {
  if (absB)
    lanesGemm<Float8, float, kFloatLanes, true>(out, rows, aT, b, k, n);
  else
    lanesGemm<Float8, float, kFloatLanes, false>(out, rows, aT, b, k, n);
}
__attribute__((target_clones("avx2", "default"))) void doubleRows(double* out, int rows, const double* aT, const float* b,
                                                                  int64_t k, int64_t n) {
  lanesGemm<Double4, double, kDoubleLanes, false>(out, rows, aT, b, k, n);
}

// aT[q R + r] = f(rowPtr(r)[q]) for r < rows, 0 for the lanes past them.
template <int R, typename T, typename RowOf, typename F>
void transposeRows(std::vector<T>& aT, int rows, int64_t k, RowOf rowPtr, F f) {
  aT.resize(std::size_t(k * R));
  for (int r = 0; r < rows; ++r) {
    const float* ar = rowPtr(r);
    for (int64_t q = 0; q < k; ++q) aT[std::size_t(q * R + r)] = f(ar[q]);
  }
  for (int r = rows; r < R; ++r)
    for (int64_t q = 0; q < k; ++q) aT[std::size_t(q * R + r)] = T(0);
}

}  // namespace

// On the encodings, whose order is the values' for non-negative floats: eight lanes of maxima (a
// scalar loop with the same condition did not vectorise; the operands' amax was 12% of analyze).
__attribute__((target_clones("avx2", "default"))) float finiteAmax(const float* v, std::size_t n) {
  Bits8 top{};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    Bits8 u;
    std::memcpy(&u, v + i, sizeof u);
    u &= 0x7fffffffu;
    u = u < 0x7f800000u ? u : Bits8{};
    top = top > u ? top : u;
  }
  uint32_t t = 0;
  for (int l = 0; l < 8; ++l) t = std::max(t, uint32_t(top[l]));
  for (; i < n; ++i) {
    const uint32_t u = fp::bitsOf(v[i]) & 0x7fffffffu;
    t = std::max(t, u < 0x7f800000u ? u : 0u);
  }
  return fp::floatOf(t);
}

float operandAmaxA(const GemmBound& g) {
  if (g.aAmax < 0) g.aAmax = finiteAmax(g.a.data(), g.a.size());
  return g.aAmax;
}
float operandAmaxB(const GemmBound& g) {
  if (g.bAmax < 0) g.bAmax = finiteAmax(g.b.data(), g.b.size());
  return g.bAmax;
}

namespace {
// |a| |b|, sum_k |a_ik| per row and sum_k |b_kj| per column of one GEMM, into the given places
void boundSums(const float* a, const float* b, int64_t m, int64_t k, int64_t n, float* absProduct, float* rowAbsSum,
               float* colAbsSum) {
  for (int64_t i = 0; i < m; ++i) {
    float s = 0.0f;
    for (int64_t q = 0; q < k; ++q) s += std::fabs(a[i * k + q]);
    rowAbsSum[i] = s;
  }
  std::fill(colAbsSum, colAbsSum + n, 0.0f);
  for (int64_t q = 0; q < k; ++q)
    for (int64_t j = 0; j < n; ++j) colAbsSum[j] += std::fabs(b[q * n + j]);
  // absProduct row i: |a_i.| |b| summed in q order in float, eight rows at a time
  std::vector<float> aT;
  for (int64_t i0 = 0; i0 < m; i0 += kFloatLanes) {
    const int rows = int(std::min<int64_t>(kFloatLanes, m - i0));
    transposeRows<kFloatLanes>(aT, rows, k, [&](int r) { return a + (i0 + r) * k; }, [](float v) { return std::fabs(v); });
    floatRows(absProduct + i0 * n, rows, aT.data(), b, k, n, true);
  }
}
}  // namespace

GemmBound gemmBound(std::vector<float>&& a, std::vector<float>&& b, int64_t m, int64_t k, int64_t n, const float* bias) {
  GemmBound g;
  g.k = k;
  g.a = std::move(a);
  g.b = std::move(b);
  g.a.resize(std::size_t(m * k));
  g.b.resize(std::size_t(k * n));
  if (bias) g.bias.assign(bias, bias + n);
  g.rows = m;
  g.cols = n;
  g.absProduct.resize(std::size_t(m * n));
  g.rowAbsSum.resize(std::size_t(m));
  g.colAbsSum.resize(std::size_t(n));
  boundSums(g.a.data(), g.b.data(), m, k, n, g.absProduct.data(), g.rowAbsSum.data(), g.colAbsSum.data());
  return g;
}

GemmBound gemmBound(const float* a, const float* b, int64_t m, int64_t k, int64_t n, const float* bias) {
  return gemmBound(std::vector<float>(a, a + m * k), std::vector<float>(b, b + k * n), m, k, n, bias);
}

GemmBound batchedGemmBound(const float* a, const float* b, int64_t batch, int64_t m, int64_t k, int64_t n, bool aShared,
                           bool bShared) {
  GemmBound g;
  g.batch = batch;
  g.k = k;
  g.rows = batch * m;
  g.cols = n;
  g.a.resize(std::size_t(batch * m * k));
  g.b.resize(std::size_t(batch * k * n));
  for (int64_t t = 0; t < batch; ++t) {
    std::copy_n(a + (aShared ? 0 : t * m * k), m * k, g.a.begin() + t * m * k);
    std::copy_n(b + (bShared ? 0 : t * k * n), k * n, g.b.begin() + t * k * n);
  }
  g.absProduct.resize(std::size_t(batch * m * n));
  g.rowAbsSum.resize(std::size_t(batch * m));
  g.colAbsSum.resize(std::size_t(batch * n));
  for (int64_t t = 0; t < batch; ++t)
    boundSums(g.a.data() + t * m * k, g.b.data() + t * k * n, m, k, n, g.absProduct.data() + t * m * n,
              g.rowAbsSum.data() + t * m, g.colAbsSum.data() + t * n);
  return g;
}

}  // namespace peat::detector

namespace peat::detector::rules {

namespace {

// The bias added to output (i, j) of a bound's GEMM: none, one per column, or (a batched bound's
// [batch, n], as a grouped conv's per-group channels) one per column of each GEMM.
std::size_t biasIndex(const GemmBound& b, int64_t i, int64_t j) {
  const int64_t perBatch = b.rows / std::max<int64_t>(1, b.batch);
  return b.bias.size() == std::size_t(b.cols) ? std::size_t(j) : std::size_t((i / perBatch) * b.cols + j);
}
double biasAt(const GemmBound& b, int64_t i, int64_t j) { return b.bias.empty() ? 0.0 : double(b.bias[biasIndex(b, i, j)]); }


// The elementwise formats the replay tries, in the order they are named when they round alike. fp8
// comes unscaled (the values cast as they are) and with one scale per tensor, as fp8 GEMMs take it
// (torch._scaled_mm, TransformerEngine's per-tensor recipe, plugin ABI v2's convention): each
// operand divided by amax / (the format's largest finite value), rounded, saturated, multiplied back.
struct Hypothesis {
  const fp::Format* format;
  fp::Overflow overflow;
  const char* id;
  bool scaled;
};
const Hypothesis kHypotheses[] = {{&fp::kTf32, fp::Overflow::Standard, "tf32", false},
                                  {&fp::kFp16, fp::Overflow::Standard, "fp16", false},
                                  {&fp::kBf16, fp::Overflow::Standard, "bf16", false},
                                  {&fp::kE4M3, fp::Overflow::Saturate, "fp8_e4m3", false},
                                  {&fp::kE5M2, fp::Overflow::Saturate, "fp8_e5m2", false},
                                  {&fp::kE4M3, fp::Overflow::Saturate, "fp8_e4m3/tensor-scale", true},
                                  {&fp::kE5M2, fp::Overflow::Saturate, "fp8_e5m2/tensor-scale", true}};

const Hypothesis* hypothesis(const std::string& id) {
  for (const Hypothesis& h : kHypotheses)
    if (id == h.id) return &h;
  return nullptr;
}

// How a hypothesis rounds one tensor: to its format as it is, or (scaled) divided by one scale for
// the whole tensor, rounded, multiplied back; a scale that is not a positive finite number leaves
// the tensor as it is.
struct TensorRounding {
  const Hypothesis* h = nullptr;
  bool keep = true;  // left as it is
  float scale = 1.0f;
  TensorRounding() = default;
  // `amax`: the tensor's largest finite |value| (finiteAmax), used by a scaled hypothesis only
  TensorRounding(const Hypothesis& hyp, float amax) : h(&hyp), keep(false) {
    if (!hyp.scaled) return;
    scale = amax > 0 ? amax / fp::decode(*hyp.format, fp::maxFinite(*hyp.format)) : 1.0f;
    keep = !(std::isfinite(scale) && scale > 0);
  }
  // operand a or b of a bound as `hyp` rounds it, its amax made once per bound
  static TensorRounding ofA(const Hypothesis& hyp, const GemmBound& g) {
    return TensorRounding(hyp, hyp.scaled ? operandAmaxA(g) : 0.0f);
  }
  static TensorRounding ofB(const Hypothesis& hyp, const GemmBound& g) {
    return TensorRounding(hyp, hyp.scaled ? operandAmaxB(g) : 0.0f);
  }
  // elements [0, count) of v, in place: each element alone, so a part rounds as the whole does
  void apply(float* v, std::size_t count) const {
    if (keep) return;
    if (h->scaled)
      for (std::size_t i = 0; i < count; ++i) v[i] /= scale;
    fp::roundInPlace(*h->format, v, count, h->overflow);
    if (h->scaled)
      for (std::size_t i = 0; i < count; ++i) v[i] *= scale;
  }
};

// A bound's operands as one hypothesis rounds them (none: as recorded): b whole (the weights), a one
// row at a time as a replay reaches it: a hypothesis that fails, fails in its first rows, so most
// of a is never rounded (or copied); each row is the same bits as rounding a whole.
class RoundedOperands {
 public:
  RoundedOperands(const GemmBound& g, const Hypothesis* h)
      : RoundedOperands(g, h ? TensorRounding::ofA(*h, g) : TensorRounding(), h ? TensorRounding::ofB(*h, g) : TensorRounding()) {}
  // with each operand's rounding (its scale) already made
  RoundedOperands(const GemmBound& g, const TensorRounding& ra, const TensorRounding& rb) : g_(g), aRounding_(ra) {
    if (!rb.keep) {
      // b rounded once per hypothesis for all of a bound's replays (up to 4M values, 16 MB, each)
      const bool keep = g.b.size() <= (std::size_t(1) << 22);
      std::vector<float>& rounded = keep ? g.roundedB[rb.h->id] : b_;
      if (rounded.size() != g.b.size()) {
        rounded = g.b;
        rb.apply(rounded.data(), rounded.size());
      }
      bRounded_ = rounded.data();
    }
    if (aRounding_.keep) return;
    a_.reset(new float[g.a.size()]);
    done_.assign(std::size_t(g.rows), 0);
  }
  const float* row(int64_t i) {
    const float* from = g_.a.data() + i * g_.k;
    if (!a_) return from;
    float* to = a_.get() + i * g_.k;
    if (!done_[std::size_t(i)]) {
      std::copy_n(from, g_.k, to);
      aRounding_.apply(to, std::size_t(g_.k));
      done_[std::size_t(i)] = 1;
    }
    return to;
  }
  const float* b() const { return bRounded_ ? bRounded_ : g_.b.data(); }

 private:
  const GemmBound& g_;
  std::vector<float> b_;
  const float* bRounded_ = nullptr;
  TensorRounding aRounding_;
  std::unique_ptr<float[]> a_;
  std::vector<char> done_;
};

// The GEMM of a bound replayed from its operands (rounded to a format, or as recorded), handed out
// one output row at a time with the bias added, in fp32 and this replay's own summation order: what
// every format hypothesis is judged by. Rows are computed eight at a time in vector lanes (each
// summed in q order): row i and the next seven a caller will ask for, `step` rows apart (1: every
// row; a sampling caller's stride), within i's GEMM of the batch.
struct RowReplay {
  RowReplay(const GemmBound& bound, RoundedOperands& operands, int64_t rowStep = 1)
      : b(bound), ops(operands), step(rowStep), perBatch(bound.rows / std::max<int64_t>(1, bound.batch)) {}
  const GemmBound& b;
  RoundedOperands& ops;
  int64_t step;
  int64_t perBatch;
  std::vector<float> aT, block;  // the rows first, first + step, ... (count of them), each b.cols values
  int64_t first = -1, count = 0;
  // row i's values; out[j] for column j
  void run(int64_t i, std::vector<double>& out) {
    const int64_t n = b.cols, k = b.k;
    if (first < 0 || i < first || (i - first) % step != 0 || (i - first) / step >= count) {
      const int64_t batchEnd = (i / perBatch + 1) * perBatch;
      first = i;
      count = std::min<int64_t>(kFloatLanes, (batchEnd - i + step - 1) / step);
      transposeRows<kFloatLanes>(aT, int(count), k, [&](int r) { return ops.row(i + r * step); }, [](float v) { return v; });
      block.resize(std::size_t(kFloatLanes * n));
      floatRows(block.data(), int(count), aT.data(), ops.b() + (i / perBatch) * k * n, k, n, false);  // i's GEMM of the batch
    }
    const float* row = block.data() + ((i - first) / step) * n;
    out.resize(std::size_t(n));
    for (int64_t j = 0; j < n; ++j) out[std::size_t(j)] = double(row[j]) + biasAt(b, i, j);
  }
};

}  // namespace

const fp::Format* outputGrid(const float* c, uint64_t n) {
  for (const fp::Format* f : {&fp::kBf16, &fp::kFp16}) {
    bool on = true;
    for (uint64_t i = 0; i < n && on; ++i)
      if (finite(c[i]) && fp::bitsOf(fp::roundTo(*f, c[i])) != fp::bitsOf(c[i])) on = false;
    if (on) return f;
  }
  return nullptr;
}

namespace {

// What a replay is allowed to differ from the candidate by: the fp32 reordering bound, and for a
// candidate stored in 16 bits (grid) one step of that format and its bias given in it (C0).
struct ReplaySlack {
  const GemmBound& b;
  const fp::Format* grid;
  double u32 = std::ldexp(1.0, -24), gamma = reorderGamma(b.k);
  double outStep = grid ? std::ldexp(1.0, -grid->manBits) : 0.0;
  // each bias value's rounding to the output's format, once (not once per output element)
  std::vector<double> biasRounding = [this] {
    std::vector<double> r(b.bias.size(), 0.0);
    if (grid)
      for (std::size_t q = 0; q < b.bias.size(); ++q)
        if (b.bias[q] != 0) r[q] = std::fabs(double(fp::roundTo(*grid, b.bias[q])) - double(b.bias[q]));
    return r;
  }();
  // whether replayed value yj of output (i, j) gives the candidate's c[i n + j]
  bool holds(const float* c, int64_t i, int64_t j, double yj) const {
    const int64_t n = b.cols;
    const double rounding = b.bias.empty() ? 0.0 : biasRounding[biasIndex(b, i, j)];
    const double slack = 2 * gamma * double(b.absProduct[std::size_t(i * n + j)]) * 1.01 + 4 * u32 * std::fabs(yj) +
                         outStep * std::fabs(yj) + rounding + 1e-30;
    return std::fabs(double(c[i * n + j]) - yj) <= slack;
  }
};

// Whether the GEMM replayed from the operands (rounded or not) gives the candidate within the slack
// at every element; `whole` (when given) gets every replayed value of a replay that holds.
bool replayHolds(const float* c, const GemmBound& b, RoundedOperands& ops, const ReplaySlack& slack,
                 std::vector<double>* whole = nullptr) {
  const int64_t m = b.rows, n = b.cols;
  RowReplay replay{b, ops};
  std::vector<double> y;
  if (whole) whole->resize(std::size_t(m * n));
  for (int64_t i = 0; i < m; ++i) {
    replay.run(i, y);
    for (int64_t j = 0; j < n; ++j)
      if (!slack.holds(c, i, j, y[std::size_t(j)])) {
        if (whole) whole->clear();
        return false;
      }
    if (whole) std::copy(y.begin(), y.end(), whole->begin() + i * n);
  }
  return true;
}

// A hypothesis that fails, fails nearly everywhere: five outputs (the corners and the middle)
// replayed alone, each operand element rounded by itself (the same bits as rounding the whole
// tensor) and summed in RowReplay's order, reject most hypotheses before any operand is rounded
// whole. True only where replayHolds would be false too (it checks these elements among all).
bool failsAtSamples(const float* c, const GemmBound& b, const TensorRounding& ra, const TensorRounding& rb,
                    const ReplaySlack& slack) {
  const int64_t m = b.rows, n = b.cols, k = b.k, perBatch = b.rows / std::max<int64_t>(1, b.batch);
  if (m == 0 || n == 0) return false;
  const std::pair<int64_t, int64_t> samples[] = {{0, 0}, {0, n - 1}, {m - 1, 0}, {m - 1, n - 1}, {m / 2, n / 2}};
  std::vector<float> row(static_cast<std::size_t>(k)), column(static_cast<std::size_t>(k));
  for (const auto& [i, j] : samples) {
    std::copy_n(b.a.data() + i * k, k, row.begin());
    const float* bc = b.b.data() + (i / perBatch) * k * n + j;
    for (int64_t q = 0; q < k; ++q) column[std::size_t(q)] = bc[q * n];
    ra.apply(row.data(), row.size());
    rb.apply(column.data(), column.size());
    float sum = 0.0f;
    for (int64_t q = 0; q < k; ++q) sum += row[std::size_t(q)] * column[std::size_t(q)];
    if (!slack.holds(c, i, j, double(sum) + biasAt(b, i, j))) return true;
  }
  return false;
}

bool replayable(const GemmBound& b) { return !b.a.empty() && double(b.rows) * double(b.cols) * double(b.k) <= 5e8; }

}  // namespace

bool recordedWithinOutputStep(const float* c, const GemmBound& b) {
  if (!replayable(b)) return false;
  const fp::Format* grid = outputGrid(c, uint64_t(b.rows * b.cols));
  RoundedOperands recorded(b, nullptr);
  return grid && replayHolds(c, b, recorded, ReplaySlack{b, grid});
}

std::vector<std::string> reproducingFormats(const float* c, const GemmBound& b) {
  std::vector<std::string> out;
  if (!replayable(b)) return out;  // too costly to replay here
  const fp::Format* grid = outputGrid(c, uint64_t(b.rows * b.cols));
  const ReplaySlack slack{b, grid};
  for (const Hypothesis& h : kHypotheses) {
    const TensorRounding ra = TensorRounding::ofA(h, b), rb = TensorRounding::ofB(h, b);
    if (failsAtSamples(c, b, ra, rb, slack)) continue;
    RoundedOperands rounded(b, ra, rb);
    // kept for formatGemm (the 2x rule's reference) up to 4M outputs (32 MB) each; larger ones it
    // replays again rather than hold several at once
    const bool keep = b.rows * b.cols <= (int64_t(1) << 22);
    std::vector<double> whole;
    if (!replayHolds(c, b, rounded, slack, keep ? &whole : nullptr)) continue;
    out.push_back(h.id);
    if (keep) b.replayed[h.id] = std::move(whole);
  }
  // Stored in 16 bits, the output's step can hide a finer input format's rounding (tf32 inside bf16's
  // step): where the operands as recorded reproduce it too, an input format counts only when its
  // replay lies clearly closer (half the squared error); else the output's format is the reading (R10).
  RoundedOperands asRecorded(b, nullptr);
  if (grid && !out.empty() && replayHolds(c, b, asRecorded, slack)) {
    const double recorded = replaySse(c, b, "");
    std::vector<std::string> closer;
    for (const std::string& id : out)
      if (replaySse(c, b, id) * 2 < recorded) closer.push_back(id);
    out = closer;
  }
  return out;
}

}  // namespace peat::detector::rules

namespace peat::detector {

std::vector<double> exactGemm(const GemmBound& b) {
  const int64_t m = b.rows, n = b.cols, k = b.k, perBatch = b.rows / std::max<int64_t>(1, b.batch);
  if (b.a.empty() || double(m) * double(n) * double(k) > 5e8) return {};
  std::vector<double> out(std::size_t(m * n), 0.0);
  std::vector<double> aT;
  for (int64_t i0 = 0; i0 < m;) {  // four rows at a time in the lanes, within one GEMM of the batch
    const int rows = int(std::min<int64_t>({kDoubleLanes, m - i0, (i0 / perBatch + 1) * perBatch - i0}));
    transposeRows<kDoubleLanes>(aT, rows, k, [&](int r) { return b.a.data() + (i0 + r) * k; }, [](float v) { return double(v); });
    doubleRows(out.data() + i0 * n, rows, aT.data(), b.b.data() + (i0 / perBatch) * k * n, k, n);
    for (int64_t i = i0; i < i0 + rows; ++i)
      for (int64_t j = 0; j < n; ++j) out[std::size_t(i * n + j)] += rules::biasAt(b, i, j);
    i0 += rows;
  }
  return out;
}

std::vector<double> formatGemm(const GemmBound& b, const std::string& format) {
  const rules::Hypothesis* h = rules::hypothesis(format);
  if (!h || b.a.empty() || double(b.rows) * double(b.cols) * double(b.k) > 5e8) return {};
  if (const auto kept = b.replayed.find(format); kept != b.replayed.end()) return kept->second;
  rules::RoundedOperands rounded(b, h);
  rules::RowReplay replay{b, rounded};
  std::vector<double> out(std::size_t(b.rows * b.cols)), y;
  for (int64_t i = 0; i < b.rows; ++i) {
    replay.run(i, y);
    std::copy(y.begin(), y.end(), out.begin() + i * b.cols);
  }
  return out;
}

}  // namespace peat::detector

namespace peat::detector::rules {

double replaySse(const float* c, const GemmBound& b, const std::string& id, double limit) {
  const int64_t m = b.rows, n = b.cols, step = std::max<int64_t>(1, m / 64);
  const Hypothesis* h = id.empty() ? nullptr : hypothesis(id);
  if (!id.empty() && !h) return std::numeric_limits<double>::infinity();
  RoundedOperands rounded(b, h);  // only the rows replayed are rounded
  RowReplay replay{b, rounded, step};
  std::vector<double> y;
  double sse = 0;
  for (int64_t i = 0; i < m; i += step) {
    replay.run(i, y);
    for (int64_t j = 0; j < n; ++j) {
      const double d = double(c[i * n + j]) - y[std::size_t(j)];
      sse += d * d;
    }
    if (sse > limit) break;  // already too far: the caller only asks whether it stays below
  }
  return sse;
}

std::vector<std::string> rankedByReplay(const float* c, const GemmBound& b, const std::vector<std::string>& formats) {
  if (formats.size() < 2) return formats;
  std::vector<std::pair<double, std::string>> byDistance;
  for (const std::string& id : formats) byDistance.emplace_back(replaySse(c, b, id), id);
  double best = std::numeric_limits<double>::infinity();
  for (const auto& d : byDistance) best = std::min(best, d.first);
  std::vector<std::string> out;
  for (const auto& d : byDistance)
    if (d.first <= best * 1.01) out.push_back(d.second);
  std::stable_sort(byDistance.begin(), byDistance.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  for (const auto& d : byDistance)
    if (!(d.first <= best * 1.01)) out.push_back(d.second);
  return out;
}

OrderDistance orderDistance(const float* golden, const float* c, const GemmBound& b) {
  OrderDistance out;
  const int64_t m = b.rows, n = b.cols, k = b.k, perBatch = b.rows / std::max<int64_t>(1, b.batch);
  // at most 64 rows are replayed (twice): the cost is 64 k n, whatever m is
  if (b.a.empty() || double(std::min<int64_t>(m, 64)) * double(n) * double(k) > 5e8) return out;
  const int64_t step = std::max<int64_t>(1, m / 64);
  RoundedOperands recorded(b, nullptr);
  RowReplay replay{b, recorded, step};
  std::vector<double> y;
  std::vector<float> reversed(static_cast<std::size_t>(n));
  double dc = 0, dg = 0, dr = 0, scale = 0;
  for (int64_t i = 0; i < m; i += step) {
    replay.run(i, y);  // fp32 sums in order, bias added
    std::fill(reversed.begin(), reversed.end(), 0.0f);
    const float* bBatch = b.b.data() + (i / perBatch) * k * n;
    for (int64_t q = k - 1; q >= 0; --q) {
      const float av = b.a[std::size_t(i * k + q)];
      for (int64_t j = 0; j < n; ++j) reversed[std::size_t(j)] += av * bBatch[q * n + j];
    }
    for (int64_t j = 0; j < n; ++j) {
      const double yj = y[std::size_t(j)];
      const float cj = c[i * n + j], gj = golden[i * n + j];
      if (!finite(cj) || !finite(gj)) continue;
      dc += (double(cj) - yj) * (double(cj) - yj);
      dg += (double(gj) - yj) * (double(gj) - yj);
      const double rj = double(reversed[std::size_t(j)]) + biasAt(b, i, j);
      dr += (rj - yj) * (rj - yj);
      scale += double(b.absProduct[std::size_t(i * n + j)]) * double(b.absProduct[std::size_t(i * n + j)]);
    }
  }
  out.measured = true;
  out.candidate = std::sqrt(dc);
  out.orders = std::max(std::sqrt(dg), std::sqrt(dr));
  out.floor = std::ldexp(std::sqrt(scale), -24);  // one fp32 rounding of the sums' scale
  return out;
}

Fp16Accumulation fp16Accumulation(const float* c, const GemmBound& b) {
  Fp16Accumulation out;
  const int64_t m = b.rows, n = b.cols, k = b.k, perBatch = b.rows / std::max<int64_t>(1, b.batch);
  if (b.a.empty() || double(m) * double(n) * double(k) > 5e8) return out;
  uint64_t off = 0, finiteCount = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const float v = c[i * n + j];
      if (!finite(v)) continue;
      ++finiteCount;
      const double s = double(v) - biasAt(b, i, j);  // the accumulator's value, up to fp32's rounding of v
      const double nearest = double(fp::roundTo(fp::kFp16, float(s)));
      if (std::fabs(s - nearest) > std::ldexp(std::fabs(double(v)), -23) + 1e-30) ++off;
    }
  out.onGrid = finiteCount > 0 && double(off) <= 1e-3 * double(finiteCount);
  if (!out.onGrid) return out;
  RoundedOperands rounded(b, hypothesis("fp16"));  // fp16 inputs, as the GEMM would take them
  const int64_t step = std::max<int64_t>(1, m / 64);
  RowReplay replay{b, rounded, step};
  std::vector<double> y;
  std::vector<float> acc(static_cast<std::size_t>(n));
  double dc = 0, da = 0;
  for (int64_t i = 0; i < m; i += step) {
    replay.run(i, y);  // fp16 inputs, fp32 sums, bias added
    std::fill(acc.begin(), acc.end(), 0.0f);
    const float* bBatch = rounded.b() + (i / perBatch) * k * n;
    const float* ar = rounded.row(i);
    for (int64_t q = k - 1; q >= 0; --q) {  // fp16 inputs, an fp16 accumulator, in reverse order
      const float av = ar[q];
      for (int64_t j = 0; j < n; ++j) acc[std::size_t(j)] = fp::roundTo(fp::kFp16, acc[std::size_t(j)] + av * bBatch[q * n + j]);
    }
    for (int64_t j = 0; j < n; ++j) {
      const double ref = y[std::size_t(j)], withAcc = double(acc[std::size_t(j)]) + biasAt(b, i, j);
      const double d = double(c[i * n + j]) - ref;
      if (finite(c[i * n + j])) dc += d * d;
      da += (withAcc - ref) * (withAcc - ref);
    }
  }
  out.candidateRms = std::sqrt(dc);
  out.accumulationRms = std::sqrt(da);
  return out;
}

}  // namespace peat::detector::rules

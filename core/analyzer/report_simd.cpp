// SPDX-License-Identifier: MIT
// Compiled once per SIMD target by Highway's foreach_target; the best one for this CPU is chosen on
// the first call.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/analyzer/report_simd.cpp"
#include "core/fp/simd_target.h"  // IWYU pragma: keep

#include <cstring>

#include "core/analyzer/report_simd.h"

PEAT_SIMD_BEGIN(peat::analyzer::detail)

// Bit-position counting without a scatter: four accumulators hold 4-bit counters for bits s, s+4,
// s+8, ... (s = 0..3). Every 15 vectors they are spread into 8-bit counters, and every 17 of those
// spreads the bytes are added into the 64-bit totals, so no counter ever overflows.
constexpr unsigned kNibbleRounds = 15, kByteRounds = 17;

// The last, partial vector of a pair: its `left` values of g and c copied into zeroed pads, and g
// and c pointed at the pads.
HWY_INLINE void padTail(const float*& g, const float*& c, std::size_t left, float (&padG)[HWY_MAX_BYTES / 4],
                        float (&padC)[HWY_MAX_BYTES / 4]) {
  std::memset(padG, 0, sizeof padG);
  std::memset(padC, 0, sizeof padC);
  std::memcpy(padG, g, left * sizeof(float));
  std::memcpy(padC, c, left * sizeof(float));
  g = padG;
  c = padC;
}

template <class DU, class V>
HWY_INLINE void spreadNibbles(DU du, V (&nibbles)[4], V (&bytes)[8]) {
  const auto low = hn::Set(du, 0x0F0F0F0Fu);
  for (int s = 0; s < 4; ++s) {
    bytes[s] = hn::Add(bytes[s], hn::And(nibbles[s], low));                              // bits 8k + s
    bytes[4 + s] = hn::Add(bytes[4 + s], hn::And(hn::ShiftRight<4>(nibbles[s]), low));  // bits 8k + 4 + s
    nibbles[s] = hn::Zero(du);
  }
}

template <class DU, class V>
HWY_INLINE void addBytes(DU du, V (&bytes)[8], std::array<uint64_t, 32>& totals) {
  HWY_ALIGN uint32_t lanes[HWY_MAX_BYTES / 4];
  const std::size_t n = hn::Lanes(du);
  for (int a = 0; a < 8; ++a) {
    hn::Store(bytes[a], du, lanes);
    for (std::size_t l = 0; l < n; ++l)  // accumulator a: byte k holds bit 8k + a
      for (int k = 0; k < 4; ++k) totals[std::size_t(8 * k + a)] += (lanes[l] >> (8 * k)) & 0xff;
    bytes[a] = hn::Zero(du);
  }
}

void ScanChunkImpl(const float* HWY_RESTRICT golden, const float* HWY_RESTRICT candidate, std::size_t n,
                   double relFloor, ChunkSums& s, ChunkBins& out, uint64_t* HWY_RESTRICT mask) {
  const hn::ScalableTag<uint32_t> du;
  const hn::ScalableTag<float> df;
  const hn::Repartition<double, decltype(df)> dd;  // half as many lanes as df
  const hn::Rebind<float, decltype(dd)> dfh;       // floats for one f64 vector
  const hn::Rebind<uint32_t, decltype(dd)> duh;
  const hn::RebindToUnsigned<decltype(dd)> du64;
  const hn::RebindToSigned<decltype(du)> di;
  const std::size_t N = hn::Lanes(du), H = hn::Lanes(dd);

  const auto expBits = hn::Set(du, 0x7f800000u), mantBits = hn::Set(du, 0x007fffffu), zero = hn::Zero(du);
  const auto signBit = hn::Set(du, 0x80000000u), ones = hn::Set(du, 0x11111111u);
  const auto expHalf = hn::Set(duh, 0x7f800000u);
  const auto floor = hn::Set(dd, relFloor);
  auto sumAbs = hn::Zero(dd), sumSq = hn::Zero(dd), sumRel = hn::Zero(dd), sumG2 = hn::Zero(dd);
  auto maxRel = hn::Zero(dd), maxAbs = hn::Zero(dd);
  uint64_t errors = 0;
  decltype(hn::Zero(du)) nibbles[4] = {zero, zero, zero, zero};
  decltype(hn::Zero(du)) bytes[8] = {zero, zero, zero, zero, zero, zero, zero, zero};
  unsigned nibbleRounds = 0, byteRounds = 0;
  uint64_t identical = 0, goldenNonFinite = 0, goldenNaN = 0, goldenInf = 0, candidateNaN = 0, candidateInf = 0;
  uint64_t newlyNonFinite = 0, nanPairs = 0, signOnly = 0, exponentInvolved = 0;

  std::memset(mask, 0, (n + 63) / 64 * sizeof(uint64_t));
  HWY_ALIGN float padG[HWY_MAX_BYTES / 4], padC[HWY_MAX_BYTES / 4];
  for (std::size_t i = 0; i < n; i += N) {
    const float* g = golden + i;
    const float* c = candidate + i;
    std::size_t padding = 0;
    if (i + N > n) {  // the tail: zeros pad it as identical, finite pairs, taken out of the counts below
      padding = i + N - n;
      padTail(g, c, n - i, padG, padC);
    }
    const auto gb = hn::BitCast(du, hn::LoadU(df, g)), cb = hn::BitCast(du, hn::LoadU(df, c));
    const auto same = hn::Eq(gb, cb);
    const auto gNonFinite = hn::Eq(hn::And(gb, expBits), expBits);
    const auto cNonFinite = hn::Eq(hn::And(cb, expBits), expBits);
    const auto gNaN = hn::And(gNonFinite, hn::Ne(hn::And(gb, mantBits), zero));
    const auto cNaN = hn::And(cNonFinite, hn::Ne(hn::And(cb, mantBits), zero));
    identical += hn::CountTrue(du, same) - padding;
    goldenNonFinite += hn::CountTrue(du, gNonFinite);
    goldenNaN += hn::CountTrue(du, gNaN);
    goldenInf += hn::CountTrue(du, hn::AndNot(gNaN, gNonFinite));
    candidateNaN += hn::CountTrue(du, cNaN);
    candidateInf += hn::CountTrue(du, hn::AndNot(cNaN, cNonFinite));
    newlyNonFinite += hn::CountTrue(du, hn::AndNot(gNonFinite, cNonFinite));
    nanPairs += hn::CountTrue(du, hn::AndNot(same, hn::Or(gNaN, cNaN)));
    const auto error = hn::AndNot(same, hn::Not(hn::Or(gNonFinite, cNonFinite)));
    errors += hn::CountTrue(du, error);
    const auto x = hn::Xor(gb, cb);
    signOnly += hn::CountTrue(du, hn::Eq(x, signBit));
    exponentInvolved += hn::CountTrue(du, hn::Ne(hn::And(x, expBits), zero));

    uint8_t bitsOut[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    hn::StoreMaskBits(du, hn::Not(same), bitsOut);
    uint64_t word;
    std::memcpy(&word, bitsOut, 8);
    if (N < 64) word &= (uint64_t(1) << N) - 1;
    mask[i / 64] |= word << (i % 64);

    nibbles[0] = hn::Add(nibbles[0], hn::And(x, ones));
    nibbles[1] = hn::Add(nibbles[1], hn::And(hn::ShiftRight<1>(x), ones));
    nibbles[2] = hn::Add(nibbles[2], hn::And(hn::ShiftRight<2>(x), ones));
    nibbles[3] = hn::Add(nibbles[3], hn::And(hn::ShiftRight<3>(x), ones));
    if (++nibbleRounds == kNibbleRounds) {
      spreadNibbles(du, nibbles, bytes);
      nibbleRounds = 0;
      if (++byteRounds == kByteRounds) {
        addBytes(du, bytes, s.bits);
        byteRounds = 0;
      }
    }

    // ULP distance on the integer line (sign-magnitude made two's complement), its floor(log2)
    // from the exponent of an exact int -> fp32 conversion (values >= 2^24 are shifted down first).
    const auto gLine = hn::IfThenElse(hn::Ne(hn::ShiftRight<31>(gb), zero),
                                      hn::Sub(zero, hn::And(gb, hn::Not(signBit))), gb);
    const auto cLine = hn::IfThenElse(hn::Ne(hn::ShiftRight<31>(cb), zero),
                                      hn::Sub(zero, hn::And(cb, hn::Not(signBit))), cb);
    const auto ulp = hn::IfThenElse(hn::RebindMask(du, hn::Gt(hn::BitCast(di, gLine), hn::BitCast(di, cLine))),
                                    hn::Sub(gLine, cLine), hn::Sub(cLine, gLine));
    const auto wide = hn::Ne(hn::ShiftRight<24>(ulp), zero);
    const auto exact = hn::IfThenElse(wide, hn::ShiftRight<8>(ulp), ulp);
    const auto exponent = hn::ShiftRight<23>(hn::BitCast(du, hn::ConvertTo(df, hn::BitCast(di, exact))));
    const auto ulpBin = hn::Sub(hn::Add(exponent, hn::IfThenElseZero(wide, hn::Set(du, 8u))), hn::Set(du, 127u));
    const auto hasUlp = hn::AndNot(hn::Or(same, hn::Or(gNaN, cNaN)), hn::Ne(ulp, zero));
    hn::StoreU(hn::IfThenElse(hasUlp, ulpBin, hn::Set(du, ChunkBins::kUlpNone)), du, out.ulp + i);
    // The percentile key: |c - g| rounded once to fp32 equals fp32(|c - g| in double), since double
    // has more than 2 * 24 + 2 bits (double rounding is innocuous).
    const auto d32 = hn::BitCast(du, hn::Abs(hn::Sub(hn::BitCast(df, cb), hn::BitCast(df, gb))));
    hn::StoreU(hn::IfThenElse(error, hn::ShiftRight<16>(d32), hn::Set(du, ChunkBins::kKeyNone)), du, out.key + i);

    // Error magnitudes in double, half a vector at a time. Pairs that are not errors (identical,
    // or either side not finite) are zeroed first, so they add nothing.
    for (std::size_t h = 0; h < N; h += H) {
      const auto gh = hn::LoadU(dfh, g + h), ch = hn::LoadU(dfh, c + h);
      const auto gbh = hn::BitCast(duh, gh), cbh = hn::BitCast(duh, ch);
      const auto gFinite = hn::Ne(hn::And(gbh, expHalf), expHalf);
      const auto halfError = hn::And(hn::And(gFinite, hn::Ne(hn::And(cbh, expHalf), expHalf)), hn::Ne(gbh, cbh));
      const auto g64 = hn::PromoteTo(dd, hn::IfThenElseZero(hn::RebindMask(dfh, halfError), gh));
      const auto c64 = hn::PromoteTo(dd, hn::IfThenElseZero(hn::RebindMask(dfh, halfError), ch));
      const auto gFinite64 = hn::PromoteTo(dd, hn::IfThenElseZero(hn::RebindMask(dfh, gFinite), gh));
      const auto d = hn::Abs(hn::Sub(c64, g64));
      const auto rel = hn::Div(d, hn::Max(hn::Abs(g64), floor));
      const auto absBin = hn::IfThenElse(hn::RebindMask(du64, hn::Gt(d, hn::Zero(dd))),
                                         hn::Sub(hn::ShiftRight<52>(hn::BitCast(du64, d)), hn::Set(du64, 1023u - 160u)),
                                         hn::Set(du64, ChunkBins::kAbsNone));
      hn::StoreU(hn::TruncateTo(duh, absBin), duh, out.abs + i + h);
      maxAbs = hn::Max(maxAbs, d);
      sumAbs = hn::Add(sumAbs, d);
      sumSq = hn::MulAdd(d, d, sumSq);
      sumRel = hn::Add(sumRel, rel);
      maxRel = hn::Max(maxRel, rel);
      sumG2 = hn::MulAdd(gFinite64, gFinite64, sumG2);
    }
  }
  spreadNibbles(du, nibbles, bytes);
  addBytes(du, bytes, s.bits);

  s.identical += identical;
  s.goldenFinite += n - goldenNonFinite;
  s.goldenNaN += goldenNaN;
  s.goldenInf += goldenInf;
  s.candidateNaN += candidateNaN;
  s.candidateInf += candidateInf;
  s.newlyNonFinite += newlyNonFinite;
  s.nanPairs += nanPairs;
  s.signOnly += signOnly;
  s.exponentInvolved += exponentInvolved;
  s.sumAbs += hn::GetLane(hn::SumOfLanes(dd, sumAbs));
  s.sumSq += hn::GetLane(hn::SumOfLanes(dd, sumSq));
  s.sumRel += hn::GetLane(hn::SumOfLanes(dd, sumRel));
  s.sumGolden2 += hn::GetLane(hn::SumOfLanes(dd, sumG2));
  out.errors = errors;
  out.maxAbs = hn::GetLane(hn::MaxOfLanes(dd, maxAbs));
  const double chunkMaxRel = hn::GetLane(hn::MaxOfLanes(dd, maxRel));
  if (chunkMaxRel > s.maxRel) s.maxRel = chunkMaxRel;
}

void GatherKeysImpl(const float* HWY_RESTRICT golden, const float* HWY_RESTRICT candidate, std::size_t n,
                    const uint32_t (&keys)[3], std::array<std::vector<float>, 3>& found) {
  const hn::ScalableTag<uint32_t> du;
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(du);
  const auto expBits = hn::Set(du, 0x7f800000u);
  const auto k0 = hn::Set(du, keys[0]), k1 = hn::Set(du, keys[1]), k2 = hn::Set(du, keys[2]);
  HWY_ALIGN float padG[HWY_MAX_BYTES / 4], padC[HWY_MAX_BYTES / 4], values[HWY_MAX_BYTES / 4];
  HWY_ALIGN uint32_t lanes[HWY_MAX_BYTES / 4];
  for (std::size_t i = 0; i < n; i += N) {
    const float* g = golden + i;
    const float* c = candidate + i;
    if (i + N > n) padTail(g, c, n - i, padG, padC);  // zero padding is identical: never an error
    const auto gv = hn::LoadU(df, g), cv = hn::LoadU(df, c);
    const auto gb = hn::BitCast(du, gv), cb = hn::BitCast(du, cv);
    const auto finite = hn::And(hn::Ne(hn::And(gb, expBits), expBits), hn::Ne(hn::And(cb, expBits), expBits));
    const auto d = hn::Abs(hn::Sub(cv, gv));
    const auto key = hn::ShiftRight<16>(hn::BitCast(du, d));
    const auto hit = hn::And(hn::And(finite, hn::Ne(gb, cb)),
                             hn::Or(hn::Eq(key, k0), hn::Or(hn::Eq(key, k1), hn::Eq(key, k2))));
    if (hn::AllFalse(du, hit)) continue;
    hn::Store(hn::IfThenElse(hit, key, hn::Set(du, ChunkBins::kKeyNone)), du, lanes);
    hn::Store(d, df, values);
    for (std::size_t l = 0; l < N; ++l)
      for (int q = 0; q < 3; ++q)
        if (lanes[l] == keys[q]) found[q].push_back(values[l]);
  }
}

const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }

PEAT_SIMD_END  // namespace HWY_NAMESPACE, namespace peat::analyzer::detail

#if HWY_ONCE
namespace peat::analyzer::detail {

HWY_EXPORT(ScanChunkImpl);
HWY_EXPORT(GatherKeysImpl);
HWY_EXPORT(TargetNameImpl);

void scanChunk(const float* golden, const float* candidate, std::size_t n, double relFloor, ChunkSums& sums,
               ChunkBins& bins, uint64_t* mask) {
  HWY_DYNAMIC_DISPATCH(ScanChunkImpl)(golden, candidate, n, relFloor, sums, bins, mask);
}

void gatherKeys(const float* golden, const float* candidate, std::size_t n, const uint32_t (&keys)[3],
                std::array<std::vector<float>, 3>& found) {
  HWY_DYNAMIC_DISPATCH(GatherKeysImpl)(golden, candidate, n, keys, found);
}

const char* simdTarget() { return HWY_DYNAMIC_DISPATCH(TargetNameImpl)(); }

}  // namespace peat::analyzer::detail
#endif

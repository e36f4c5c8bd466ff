// Gradient codecs (core/training/codec.h):
//  - the built-in BF16 and FP8_E4M3 codecs give the bits kernels/cpu/wire_codec gives (what the
//    compressed reductions produced before codecs were an interface), and BF16 rounds as an
//    independent round-to-nearest-even written here;
//  - a codec registered directly with plugin::add_codec (as the plugin loader does) is found by
//    its id and called through the interface; a nonzero return from its encode or decode throws
//    an error naming the codec, its plugin and the value; unknown ids are refused clearly;
//  - error feedback (encode_with_feedback) against the arithmetic written out here, over
//    several steps, with the non-finite rule.
// WEFT_TEST_INJECT=1 corrupts every checked result once (one flipped bit) and passes only when
// each corruption was caught (unit.codec_inject).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/common/status.h"
#include "core/plugin/registry.h"
#include "core/training/codec.h"
#include "inject_tally.h"
#include "kernels/cpu/wire_codec.h"

namespace {

using weft::Error;
using weft::Status;
using weft::training::Codec;
using weft::training::codec_of;
using weft::training::encode_with_feedback;

::testing::Environment* const kInjectionReport = inject::register_report();

// got must equal want byte for byte; with injection one byte of got is flipped first and the
// comparison must then fail.
void check_bytes(std::vector<unsigned char> got, const std::vector<unsigned char>& want, const std::string& what) {
  const bool injected = inject::enabled() && !got.empty();
  if (injected) {
    got[got.size() / 2] ^= 0x40;
    ++inject::tally().injected;
  }
  const bool same = got.size() == want.size() && (got.empty() || std::memcmp(got.data(), want.data(), got.size()) == 0);
  if (injected) {
    if (!same) ++inject::tally().caught;
    return;
  }
  EXPECT_TRUE(same) << what;
}

std::vector<unsigned char> bytes_of(const float* p, size_t n) {
  std::vector<unsigned char> b(n * sizeof(float));
  if (n) std::memcpy(b.data(), p, b.size());
  return b;
}

using inject::check;

// Values over many binades, signs, exact ties for rounding, and (when specials) inf and NaN.
std::vector<float> inputs(size_t n, bool specials) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const float m = std::ldexp(1.0f + static_cast<float>((i * 37) % 128) / 128.0f, static_cast<int>((i * 11) % 40) - 20);
    v[i] = (i % 3 == 0) ? -m : m;
  }
  if (specials && n > 10) {
    v[3] = std::numeric_limits<float>::infinity();
    v[n - 2] = std::numeric_limits<float>::quiet_NaN();
    v[5] = 0.0f;
    v[7] = -0.0f;
    v[9] = std::numeric_limits<float>::denorm_min();
  }
  return v;
}

// bfloat16 by round-to-nearest-even on the bits (NaN kept quiet), written independently of
// kernels/cpu/convert.h.
uint16_t bf16_reference(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  const uint32_t lsb = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7fffu + lsb) >> 16);
}

float bf16_value(float x) {
  const uint32_t u = static_cast<uint32_t>(bf16_reference(x)) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Codec, BuiltinsGiveWireCodecBits) {
  for (int wire : {1, 2}) {
    const auto kw = static_cast<weft::kernels::WireFormat>(wire);
    const std::shared_ptr<const Codec> c = codec_of(wire);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->id(), wire);
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{255}, size_t{256}, size_t{257}, size_t{1000}, size_t{3000}}) {
      for (bool specials : {false, true}) {
        const std::string what = c->name() + " n=" + std::to_string(n) + (specials ? " with inf/NaN" : "");
        const std::vector<float> x = inputs(n, specials);
        ASSERT_EQ(c->bytes(n), weft::kernels::wire_bytes(kw, n)) << what;
        std::vector<unsigned char> got(c->bytes(n)), want(c->bytes(n));
        c->encode(x.data(), n, got.data());
        weft::kernels::wire_encode(kw, x.data(), n, want.data());
        check_bytes(got, want, what + ": encode");
        std::vector<float> dg(n), dw(n);
        c->decode(want.data(), n, dg.data());
        weft::kernels::wire_decode(kw, want.data(), n, dw.data());
        check_bytes(bytes_of(dg.data(), n), bytes_of(dw.data(), n), what + ": decode");
        std::vector<float> ag(x), aw(x), scratch;
        c->decode_add(want.data(), n, ag.data(), scratch);
        weft::kernels::wire_decode_add(kw, want.data(), n, aw.data());
        check_bytes(bytes_of(ag.data(), n), bytes_of(aw.data(), n), what + ": decode_add");
        if (wire != 1) continue;
        // BF16 against the independent rounding.
        std::vector<unsigned char> ref(2 * n);
        for (size_t i = 0; i < n; ++i) {
          const uint16_t h = bf16_reference(x[i]);
          std::memcpy(ref.data() + 2 * i, &h, 2);
        }
        check_bytes(got, ref, what + ": against round-to-nearest-even");
      }
    }
  }
}

TEST(Codec, NativeIsNoCodecAndUnknownIdsAreRefused) {
  check(codec_of(0) == nullptr, "NATIVE has no codec");
  for (int id : {3, 63, -1}) {
    try {
      codec_of(id);
      check(false, "wire " + std::to_string(id) + " was accepted");
    } catch (const Error& e) {
      check(e.status() == Status::invalid_argument && std::string(e.what()).find("not a weft_wire_format_t") != std::string::npos,
                 std::string("wire ") + std::to_string(id) + ": " + e.what());
    }
  }
  try {
    codec_of(weft::plugin::kIdBase + 100000);
    check(false, "an unregistered plugin id was accepted");
  } catch (const Error& e) {
    check(e.status() == Status::invalid_argument && std::string(e.what()).find("gradient codec") != std::string::npos,
               e.what());
  }
}

// A codec written here, registered as a plugin's would be: keeps the even-indexed values
// (float32 bytes), drops the odd ones.
size_t evens_bytes(size_t count) { return (count + 1) / 2 * sizeof(float); }
int32_t evens_encode(const float* src, size_t count, void* dst) {
  for (size_t j = 0; 2 * j < count; ++j) std::memcpy(static_cast<char*>(dst) + j * 4, src + 2 * j, 4);
  return 0;
}
int32_t evens_decode(const void* src, size_t count, float* dst) {
  for (size_t i = 0; i < count; ++i) {
    if (i % 2) {
      dst[i] = 0.0f;
    } else {
      std::memcpy(dst + i, static_cast<const char*>(src) + i / 2 * 4, 4);
    }
  }
  return 0;
}
int32_t failing_encode(const float*, size_t, void*) { return 7; }
int32_t failing_decode(const void*, size_t, float*) { return 42; }

int evens_id() {
  static const int id = weft::plugin::add_codec(
      {{"evens", "test_codecs", "/nowhere/libtest_codecs.so"}, evens_bytes, evens_encode, evens_decode});
  return id;
}

TEST(Codec, PluginCodecFromTheRegistry) {
  const int id = evens_id();
  ASSERT_GE(id, weft::plugin::kIdBase);
  const std::shared_ptr<const Codec> c = codec_of(id);
  ASSERT_TRUE(c);
  check(c->id() == id, "id");
  check(c->name().find("'evens'") != std::string::npos && c->name().find("test_codecs") != std::string::npos,
             "name: " + c->name());
  const size_t n = 9;
  const std::vector<float> x = inputs(n, false);
  check(c->bytes(n) == 20, "bytes(9) = 4 * 5");
  std::vector<unsigned char> enc(c->bytes(n));
  c->encode(x.data(), n, enc.data());
  std::vector<unsigned char> want;
  for (size_t i = 0; i < n; i += 2) {
    const auto b = bytes_of(&x[i], 1);
    want.insert(want.end(), b.begin(), b.end());
  }
  check_bytes(enc, want, "evens: encode");
  std::vector<float> dec(n, 5.0f), acc(n, 1.5f), scratch;
  c->decode(enc.data(), n, dec.data());
  c->decode_add(enc.data(), n, acc.data(), scratch);
  std::vector<float> dec_ref(n), acc_ref(n);
  for (size_t i = 0; i < n; ++i) {
    dec_ref[i] = i % 2 ? 0.0f : x[i];
    acc_ref[i] = 1.5f + dec_ref[i];
  }
  check_bytes(bytes_of(dec.data(), n), bytes_of(dec_ref.data(), n), "evens: decode");
  check_bytes(bytes_of(acc.data(), n), bytes_of(acc_ref.data(), n), "evens: decode_add");
}

TEST(Codec, PluginFailuresNameTheCodecAndPlugin) {
  const int id = weft::plugin::add_codec(
      {{"failing", "test_codecs", "/nowhere/libtest_codecs.so"}, evens_bytes, failing_encode, failing_decode});
  const std::shared_ptr<const Codec> c = codec_of(id);
  std::vector<float> x(4, 1.0f);
  std::vector<unsigned char> enc(c->bytes(4));
  try {
    c->encode(x.data(), 4, enc.data());
    check(false, "a failing encode passed");
  } catch (const Error& e) {
    const std::string m = e.what();
    check(e.status() == Status::mismatch && m.find("'failing'") != std::string::npos &&
                   m.find("test_codecs") != std::string::npos && m.find("encode returned 7") != std::string::npos,
               "encode: " + m);
  }
  try {
    c->decode(enc.data(), 4, x.data());
    check(false, "a failing decode passed");
  } catch (const Error& e) {
    const std::string m = e.what();
    check(e.status() == Status::invalid_argument && m.find("decode returned 42") != std::string::npos, "decode: " + m);
  }
}

// v = g + r; sent = encode(v); r = v - decode(sent) (0 where not finite), written out per codec.
void feedback_reference(int wire, std::vector<float>& g, std::vector<float>& r) {
  for (size_t i = 0; i < g.size(); ++i) {
    const float v = g[i] + r[i];
    const float seen = wire == 1 ? bf16_value(v) : (i % 2 ? 0.0f : v);
    const float lost = v - seen;
    g[i] = v;
    r[i] = std::isfinite(lost) ? lost : 0.0f;
  }
}

TEST(Codec, ErrorFeedbackArithmetic) {
  for (int wire : {1, evens_id()}) {
    const std::shared_ptr<const Codec> c = codec_of(wire);
    const size_t n = 301;
    std::vector<float> residual(n, 0.0f), ref_residual(n, 0.0f);
    std::vector<float> sent_sum(n, 0.0f), given_sum(n, 0.0f);
    for (int step = 0; step < 4; ++step) {
      const std::string what = c->name() + " step " + std::to_string(step);
      std::vector<float> g = inputs(n, false);
      for (size_t i = 0; i < n; ++i) g[i] = std::round(g[i] * 64.0f + static_cast<float>(step)) / 8.0f;
      std::vector<float> data(g), ref(g);
      std::vector<unsigned char> enc(c->bytes(n)), ref_enc(c->bytes(n));
      encode_with_feedback(*c, data.data(), n, enc.data(), residual.data());
      feedback_reference(wire, ref, ref_residual);
      c->encode(ref.data(), n, ref_enc.data());
      check_bytes(bytes_of(data.data(), n), bytes_of(ref.data(), n), what + ": v = g + residual");
      check_bytes(enc, ref_enc, what + ": encode(v)");
      check_bytes(bytes_of(residual.data(), n), bytes_of(ref_residual.data(), n), what + ": residual");
      std::vector<float> seen(n);
      c->decode(enc.data(), n, seen.data());
      for (size_t i = 0; i < n; ++i) {
        sent_sum[i] += seen[i];
        given_sum[i] += g[i];
      }
    }
    if (wire == 1) continue;
    // The evens codec on multiples of 1/8: every sum is exact, so what was sent plus what is
    // still owed equals what was given (error feedback loses nothing).
    std::vector<float> owed(n);
    for (size_t i = 0; i < n; ++i) owed[i] = sent_sum[i] + residual[i];
    check_bytes(bytes_of(owed.data(), n), bytes_of(given_sum.data(), n), "sent + residual = given");
  }
}

TEST(Codec, ErrorFeedbackKeepsNoNonFiniteResidual) {
  const std::shared_ptr<const Codec> c = codec_of(evens_id());
  std::vector<float> data = {1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), 2.5f};
  std::vector<float> residual = {0.5f, 0.25f, 1.0f, 0.125f};
  std::vector<unsigned char> enc(c->bytes(4));
  encode_with_feedback(*c, data.data(), 4, enc.data(), residual.data());
  // 0: kept (residual 0); 1: inf dropped (inf - 0: not finite -> 0); 2: NaN kept (NaN - NaN -> 0);
  // 3: dropped, owes 2.625.
  const std::vector<float> want = {0.0f, 0.0f, 0.0f, 2.625f};
  check_bytes(bytes_of(residual.data(), 4), bytes_of(want.data(), 4), "non-finite residuals");
}

}  // namespace

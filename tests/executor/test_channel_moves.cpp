// Channel moves on the CPU backend, kernel by kernel: concatenations and slices whose channel
// ranges do not start on a block, and channel shuffles, equal their definition for every pair of
// source and destination layouts, batch 1 and 2, f32 and u8; a blocked destination's padding
// lanes are zero; the native channel gather (not a reference kernel or a detour through nchw) is
// what runs them. Tensors go in and out through the backend's layout copies (oneDNN reorders).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>

#include "common/strings.h"
#include "executor/backend.h"
#include "support/models.h"

namespace stagecraft::executor {
namespace {

using graph::DataType;
using graph::Layout;
using graph::OpKind;
using graph::TensorDesc;

constexpr auto& cpu = stagecraft::testing::cpu_backend;
constexpr Layout kLayouts[] = {Layout::kNCHW, Layout::kNHWC, Layout::kNChw8c, Layout::kNChw16c};
constexpr int64_t kHeight = 3, kWidth = 5;

TensorDesc desc(int64_t batch, int64_t channels, Layout layout, DataType type) {
  TensorDesc d = graph::make_desc(graph::Shape{batch, channels, kHeight, kWidth}, type);
  d.layout = layout;
  return d;
}

// Distinct values per element (exact in u8 too: < 256 distinct patterns are enough to catch a
// misplaced channel, pixel or image).
std::vector<float> values(const TensorDesc& d, int salt) {
  std::vector<float> v(static_cast<size_t>(d.shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7 + static_cast<size_t>(salt) * 31) % 251);
  return v;
}

// A host tensor in nchw of `type` holding `v`.
std::vector<uint8_t> encode(const std::vector<float>& v, DataType type) {
  if (type == DataType::kF32) {
    std::vector<uint8_t> bytes(v.size() * sizeof(float));
    std::memcpy(bytes.data(), v.data(), bytes.size());
    return bytes;
  }
  return {v.begin(), v.end()};
}

std::vector<float> decode(const std::vector<uint8_t>& bytes, DataType type) {
  if (type == DataType::kF32) {
    std::vector<float> v(bytes.size() / sizeof(float));
    std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  }
  return {bytes.begin(), bytes.end()};
}

// Copies `from` (bytes of a tensor described by `a`) into a tensor described by `b` on the backend.
void convert(const TensorDesc& a, const void* from, const TensorDesc& b, void* to) {
  auto copy = cpu().create_copy(a, b);
  auto ws = cpu().allocate(std::max<size_t>(1, copy->workspace_bytes()));
  copy->bind({{const_cast<void*>(from), a}}, {{to, b}}, ws->data());
  auto stream = cpu().create_stream();
  copy->launch(*stream);
  stream->synchronize();
}

struct Result {
  std::vector<std::vector<float>> outputs;  // nchw
  std::vector<std::string> padding_errors;
  std::string implementation;
};

// Runs `spec` on sources given in nchw; destinations are filled with 0xff bytes first.
Result run_kernel(const KernelSpec& spec, const std::vector<std::vector<float>>& srcs) {
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<TensorRef> in, out;
  for (size_t i = 0; i < srcs.size(); ++i) {
    const TensorDesc& d = spec.srcs[i];
    TensorDesc plain = d;
    plain.layout = Layout::kNCHW;
    const std::vector<uint8_t> bytes = encode(srcs[i], d.dtype);
    buffers.push_back(cpu().allocate(static_cast<size_t>(d.bytes())));
    convert(plain, bytes.data(), d, buffers.back()->data());
    in.push_back({buffers.back()->data(), d});
  }
  for (const TensorDesc& d : spec.dsts) {
    buffers.push_back(cpu().allocate(static_cast<size_t>(d.bytes())));
    std::memset(buffers.back()->data(), 0xff, static_cast<size_t>(d.bytes()));
    out.push_back({buffers.back()->data(), d});
  }
  auto kernel = cpu().create_kernel(spec);
  auto ws = cpu().allocate(std::max<size_t>(1, kernel->workspace_bytes()));
  kernel->bind(in, out, ws->data());
  auto stream = cpu().create_stream();
  kernel->launch(*stream);
  stream->synchronize();
  Result r;
  r.implementation = kernel->implementation();
  for (const TensorRef& o : out) {
    TensorDesc plain = o.desc;
    plain.layout = Layout::kNCHW;
    std::vector<uint8_t> bytes(static_cast<size_t>(plain.bytes()));
    convert(o.desc, o.data, plain, bytes.data());
    r.outputs.push_back(decode(bytes, o.desc.dtype));
    // Padding lanes of a blocked destination: channels C..padded C of every block row.
    const int64_t block = graph::channel_block(o.desc.layout);
    if (block == 0 || o.desc.shape[1] % block == 0) continue;
    const int64_t c = o.desc.shape[1], blocks = (c + block - 1) / block, pixels = kHeight * kWidth;
    const size_t element = static_cast<size_t>(graph::size_of(o.desc.dtype));
    const auto* base = static_cast<const uint8_t*>(o.data);
    for (int64_t n = 0; n < o.desc.shape[0]; ++n) {
      for (int64_t p = 0; p < pixels; ++p) {
        for (int64_t lane = c % block; lane < block; ++lane) {
          const int64_t at = ((n * blocks + blocks - 1) * pixels + p) * block + lane;
          const uint8_t* e = base + static_cast<size_t>(at) * element;
          if (std::any_of(e, e + element, [](uint8_t b) { return b != 0; }) && r.padding_errors.size() < 4) {
            r.padding_errors.push_back(cat("image ", n, " pixel ", p, " lane ", lane));
          }
        }
      }
    }
  }
  return r;
}

// Channel `c` of image `n` of an nchw tensor with `channels` channels.
std::vector<float> channel(const std::vector<float>& t, int64_t channels, int64_t n, int64_t c) {
  const int64_t pixels = kHeight * kWidth;
  const auto first = t.begin() + (n * channels + c) * pixels;
  return {first, first + pixels};
}

void expect_channels(const Result& r, size_t output, int64_t batch, int64_t channels,
                     const std::function<std::vector<float>(int64_t n, int64_t c)>& want,
                     const std::string& where) {
  ASSERT_LT(output, r.outputs.size()) << where;
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      ASSERT_EQ(channel(r.outputs[output], channels, n, c), want(n, c))
          << where << ": output " << output << ", image " << n << ", channel " << c;
    }
  }
  EXPECT_TRUE(r.padding_errors.empty()) << where << ": padding not zero at " << join(r.padding_errors, ", ");
}

KernelSpec spec_of(OpKind kind, graph::OpAttrs attrs, std::vector<TensorDesc> srcs,
                   std::vector<TensorDesc> dsts) {
  KernelSpec spec;
  spec.kind = kind;
  spec.attrs = std::move(attrs);
  spec.srcs = std::move(srcs);
  spec.dsts = std::move(dsts);
  spec.threads = 2;
  spec.name = "move";
  return spec;
}

// Concatenates `srcs` (holding `data`, `parts[i]` channels each) into `dst` and expects every
// output channel to be the channel of its part.
Result expect_concatenation(const std::vector<int64_t>& parts, const std::vector<TensorDesc>& srcs,
                            const std::vector<std::vector<float>>& data, const TensorDesc& dst,
                            const std::string& where) {
  const Result r = run_kernel(spec_of(OpKind::kConcat, graph::ConcatAttrs{}, srcs, {dst}), data);
  expect_channels(r, 0, dst.shape[0], dst.shape[1], [&](int64_t n, int64_t c) {
    size_t i = 0;
    while (c >= parts[i]) c -= parts[i++];
    return channel(data[i], parts[i], n, c);
  }, where);
  return r;
}

bool blocked_unaligned(Layout layout, std::initializer_list<int64_t> offsets) {
  const int64_t block = graph::channel_block(layout);
  return std::any_of(offsets.begin(), offsets.end(), [&](int64_t o) { return block > 0 && o % block != 0; });
}

TEST(ChannelMoves, ConcatenationsOfUnalignedPartsEqualTheirDefinitionInEveryLayoutPair) {
  const std::vector<int64_t> parts = {5, 11, 3};
  for (DataType type : {DataType::kF32, DataType::kU8}) {
    for (int64_t batch : {1, 2}) {
      for (Layout dst_layout : kLayouts) {
        for (size_t rotation = 0; rotation < std::size(kLayouts); ++rotation) {
          std::vector<TensorDesc> srcs;
          std::vector<std::vector<float>> data;
          for (size_t i = 0; i < parts.size(); ++i) {
            srcs.push_back(desc(batch, parts[i], kLayouts[(rotation + i) % std::size(kLayouts)], type));
            data.push_back(values(srcs.back(), static_cast<int>(i)));
          }
          const TensorDesc dst = desc(batch, 19, dst_layout, type);
          const std::string where = cat(graph::to_string(type), " batch ", batch, " into ",
                                        graph::to_string(dst_layout), " from ",
                                        graph::to_string(srcs[0].layout), "/",
                                        graph::to_string(srcs[1].layout), "/",
                                        graph::to_string(srcs[2].layout));
          const Result r = expect_concatenation(parts, srcs, data, dst, where);
          if (blocked_unaligned(dst_layout, {5, 16})) {
            EXPECT_EQ(r.implementation, "channel gather") << where;
          }
        }
      }
    }
  }
}

// f32 parts whose pixels hold whole 8-channel chunks (blocked, nhwc with 16 channels) go into a
// blocked destination on the vector path (permuted and blended chunks) where the CPU has AVX2.
TEST(ChannelMoves, ConcatenationsOfChunkedPartsEqualTheirDefinitionInBlockedLayouts) {
  const std::vector<int64_t> parts = {5, 16, 3, 7};
  const Layout part_layouts[] = {Layout::kNChw8c, Layout::kNHWC, Layout::kNChw16c, Layout::kNChw8c};
  for (int64_t batch : {1, 2}) {
    for (Layout dst_layout : {Layout::kNChw8c, Layout::kNChw16c}) {
      std::vector<TensorDesc> srcs;
      std::vector<std::vector<float>> data;
      for (size_t i = 0; i < parts.size(); ++i) {
        srcs.push_back(desc(batch, parts[i], part_layouts[i], DataType::kF32));
        data.push_back(values(srcs.back(), static_cast<int>(i) + 7));
      }
      const TensorDesc dst = desc(batch, 31, dst_layout, DataType::kF32);
      const std::string where = cat("batch ", batch, " into ", graph::to_string(dst_layout));
      const Result r = expect_concatenation(parts, srcs, data, dst, where);
      EXPECT_EQ(r.implementation, "channel gather") << where;
    }
  }
}

TEST(ChannelMoves, UnalignedSlicesAndSplitsEqualTheirDefinitionInEveryLayoutPair) {
  for (DataType type : {DataType::kF32, DataType::kU8}) {
    for (int64_t batch : {1, 2}) {
      for (Layout src_layout : kLayouts) {
        for (Layout dst_layout : kLayouts) {
          const TensorDesc src = desc(batch, 19, src_layout, type);
          const std::vector<float> data = values(src, 3);
          const std::string where = cat(graph::to_string(type), " batch ", batch, " ",
                                        graph::to_string(src_layout), " to ", graph::to_string(dst_layout));
          graph::SliceAttrs slice;
          slice.begin = 3;
          slice.end = 14;
          const Result sliced = run_kernel(
              spec_of(OpKind::kSlice, slice, {src}, {desc(batch, 11, dst_layout, type)}), {data});
          expect_channels(sliced, 0, batch, 11, [&](int64_t n, int64_t c) { return channel(data, 19, n, c + 3); },
                          "slice " + where);
          graph::SplitAttrs split;
          split.sizes = {6, 7, 6};
          const Result parts = run_kernel(
              spec_of(OpKind::kSplit, split, {src},
                      {desc(batch, 6, dst_layout, type), desc(batch, 7, dst_layout, type),
                       desc(batch, 6, dst_layout, type)}),
              {data});
          for (size_t i = 0, c0 = 0; i < 3; c0 += static_cast<size_t>(split.sizes[i]), ++i) {
            expect_channels(parts, i, batch, split.sizes[i], [&](int64_t n, int64_t c) {
              return channel(data, 19, n, static_cast<int64_t>(c0) + c);
            }, "split " + where);
          }
          if (src_layout == dst_layout && blocked_unaligned(src_layout, {3, 6})) {
            EXPECT_EQ(sliced.implementation, "channel gather") << where;
            EXPECT_EQ(parts.implementation, "channel gather") << where;
          }
        }
      }
    }
  }
}

// ShuffleNet's channel shuffle: destination channel j is source channel (j % g) * (C / g) + j / g.
// (f32 only: a backend-independent rule keeps quantised tensors out of channel shuffles.)
TEST(ChannelMoves, ChannelShufflesEqualTheirDefinitionInEveryLayout) {
  for (DataType type : {DataType::kF32}) {
    for (int64_t batch : {1, 2}) {
      for (Layout layout : kLayouts) {
        for (int64_t groups : {2, 3}) {
          const TensorDesc d = desc(batch, 18, layout, type);
          const std::vector<float> data = values(d, 5);
          graph::ChannelShuffleAttrs shuffle;
          shuffle.groups = groups;
          const Result r = run_kernel(spec_of(OpKind::kChannelShuffle, shuffle, {d}, {d}), {data});
          const std::string where = cat(graph::to_string(type), " batch ", batch, " ",
                                        graph::to_string(layout), " groups ", groups);
          expect_channels(r, 0, batch, 18, [&](int64_t n, int64_t j) {
            return channel(data, 18, n, j % groups * (18 / groups) + j / groups);
          }, where);
          EXPECT_EQ(r.implementation, "channel gather") << where;
        }
      }
    }
  }
}

}  // namespace
}  // namespace stagecraft::executor

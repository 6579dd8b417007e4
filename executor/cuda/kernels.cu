// Own CUDA kernels of the CUDA backend: grid-stride loops over the per-element bodies of
// element_ops.h (thread i writes destination offset i: coalesced in NCHW and NHWC), packs of 4
// elements per thread for flat element-wise kernels on aligned tensors, 16-byte units for
// same-layout channel copies, one warp per plane for NCHW global pooling.
#include <cuda_fp16.h>

#include <cstdint>

#include "executor/cuda/grid.cuh"
#include "executor/cuda/kernels.h"
#include "executor/cuda/movement_ops.h"

namespace stagecraft::executor::cuda {

namespace {

constexpr int kPack = 4;  // elements per thread in the packed element-wise kernels
constexpr unsigned kFullWarp = 0xffffffffu;

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

/// Four elements loaded and stored as one vector.
template <class T>
struct alignas(kPack * sizeof(T)) Pack4 {
  T v[kPack];
};

template <class T>
bool packable(int64_t n, const void* p) {
  return n % kPack == 0 && aligned(p, sizeof(Pack4<T>));
}

// ---- Element-wise ------------------------------------------------------------------------------

// Element-wise maps: f(x, y, i) writes y[i] from x[i] (act_at, scale_at with their parameter).
struct ActMap {
  ActParams act;
  template <class T>
  __device__ void operator()(const T* x, T* y, int64_t i) const {
    act_at(x, y, i, act);
  }
};

struct ScaleMap {
  float factor;
  template <class T>
  __device__ void operator()(const T* x, T* y, int64_t i) const {
    scale_at(x, y, i, factor);
  }
};

template <class T, class Map>
__global__ void map_kernel(const T* x, T* y, int64_t n, Map f) {
  GRID_LOOP(i, n) { f(x, y, i); }
}

template <class T, class Map>
__global__ void map_pack_kernel(const Pack4<T>* x, Pack4<T>* y, int64_t packs, Map f) {
  GRID_LOOP(i, packs) {
    const Pack4<T> in = x[i];
    Pack4<T> out;
    for (int k = 0; k < kPack; ++k) f(in.v, out.v, k);
    y[i] = out;
  }
}

template <class T, class TO>
__global__ void binary_kernel(const T* x, Dims4 xd, const TO* o, Dims4 od, T* y, Dims4 yd,
                              BinaryParams p) {
  GRID_LOOP(i, yd.numel()) { binary_at(x, xd, o, od, y, yd, p, i); }
}

// x has y's geometry: x and y move in packs of 4, o is read per element (broadcast).
template <class T, class TO>
__global__ void binary_pack_kernel(const Pack4<T>* x, const TO* o, Dims4 od, Pack4<T>* y, Dims4 yd,
                                   BinaryParams p) {
  GRID_LOOP(i, yd.numel() / kPack) {
    const Pack4<T> in = x[i];
    Pack4<T> out;
    for (int k = 0; k < kPack; ++k) store(out.v, k, binary_with(load(in.v, k), o, od, yd, p, i * kPack + k));
    y[i] = out;
  }
}

template <class T>
__global__ void bias_act_kernel(T* y, const float* bias, Dims4 d, Act act, float relu6_max) {
  GRID_LOOP(i, d.numel()) { bias_act_at(y, bias, d, i, act, relu6_max); }
}

template <class T>
__global__ void bias_act_pack_kernel(Pack4<T>* y, const float* bias, Dims4 d, Act act,
                                     float relu6_max) {
  GRID_LOOP(i, d.numel() / kPack) {
    Pack4<T> p = y[i];
    for (int k = 0; k < kPack; ++k) {
      store(p.v, k, bias_act_value(load(p.v, k), bias, d, i * kPack + k, act, relu6_max));
    }
    y[i] = p;
  }
}

template <class T>
__global__ void scale_shift_kernel(const T* x, T* y, const float* scale, const float* shift, Dims4 d) {
  GRID_LOOP(i, d.numel()) { scale_shift_at(x, y, scale, shift, d, i); }
}

template <class T>
__global__ void scale_shift_pack_kernel(const Pack4<T>* x, Pack4<T>* y, const float* scale,
                                        const float* shift, Dims4 d) {
  GRID_LOOP(i, d.numel() / kPack) {
    const Pack4<T> in = x[i];
    Pack4<T> out;
    for (int k = 0; k < kPack; ++k) {
      store(out.v, k, scale_shift_value(load(in.v, k), scale, shift, d, i * kPack + k));
    }
    y[i] = out;
  }
}

template <class T>
struct AddInputs {
  const T* p[kMaxAddInputs];
};

template <class T>
__global__ void add_kernel(AddInputs<T> in, int count, T* y, int64_t n, Act act, float relu6_max) {
  GRID_LOOP(i, n) { add_at(in.p, count, y, i, act, relu6_max); }
}

template <class T>
__global__ void add_pack_kernel(AddInputs<Pack4<T>> in, int count, Pack4<T>* y, int64_t packs,
                                Act act, float relu6_max) {
  GRID_LOOP(i, packs) {
    float acc[kPack] = {0.f, 0.f, 0.f, 0.f};
    for (int k = 0; k < count; ++k) {
      const Pack4<T> a = in.p[k][i];
      for (int j = 0; j < kPack; ++j) acc[j] += load(a.v, j);
    }
    Pack4<T> out;
    for (int j = 0; j < kPack; ++j) store(out.v, j, activate(acc[j], act, relu6_max));
    y[i] = out;
  }
}

template <class T>
__global__ void add_scaled_kernel(ScaledInputs<kMaxAddInputs> in, int count, T* y, int64_t n, Act act,
                                  float relu6_max) {
  GRID_LOOP(i, n) { add_scaled_at(in, count, y, i, act, relu6_max); }
}

// ---- Pooling -----------------------------------------------------------------------------------

template <class T>
__global__ void pool_kernel(const T* x, Dims4 in, T* y, Dims4 out, PoolParams p) {
  GRID_LOOP(i, out.numel()) { pool_at(x, in, y, out, p, i); }
}

template <class R, class T>
__global__ void global_pool_kernel(const T* x, T* y, Dims4 in) {
  GRID_LOOP(i, in.n * in.c) { global_pool_at<R>(x, in, y, i); }
}

// NCHW: one warp per H×W plane (lanes read neighbouring addresses), reduced by shuffles. The loop
// bound is the same for every lane of a warp, so the full-warp shuffles are safe.
template <class R, class T>
__global__ void global_pool_planes_kernel(const T* x, T* y, Dims4 in) {
  const int64_t planes = in.n * in.c;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarp;
  for (int64_t nc = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / kWarp;
       nc < planes; nc += warps) {
    float acc = plane_partial<R>(x, in, nc, lane, kWarp);
    for (int o = kWarp / 2; o > 0; o /= 2) acc = R::fold(acc, __shfl_down_sync(kFullWarp, acc, o));
    if (lane == 0) store(y, nc, R::result(acc, in.h * in.w));
  }
}

// ---- Data movement -----------------------------------------------------------------------------

template <class T>
__global__ void channel_shuffle_kernel(const T* x, Dims4 xd, T* y, Dims4 yd, int64_t groups) {
  GRID_LOOP(i, yd.numel()) { channel_shuffle_at(x, xd, y, yd, groups, i); }
}

template <class U>
__global__ void shuffle_planes_kernel(const U* x, U* y, ShufflePlanes r) {
  GRID_LOOP(i, r.units()) { shuffle_planes_at(x, y, r, i); }
}

template <class T>
__global__ void resize_kernel(const T* x, Dims4 xd, T* y, Dims4 yd, double scale_h, double scale_w,
                              bool linear) {
  GRID_LOOP(i, yd.numel()) { resize_at(x, xd, y, yd, scale_h, scale_w, linear, i); }
}

template <class T>
__global__ void reshape_kernel(const T* x, Dims4 xd, T* y, Dims4 yd) {
  GRID_LOOP(i, yd.numel()) { reshape_at(x, xd, y, yd, i); }
}

template <class T>
__global__ void copy_channels_kernel(const T* src, Dims4 sd, int64_t sc0, T* dst, Dims4 dd,
                                     int64_t dc0, int64_t channels) {
  GRID_LOOP(i, dd.n * channels * dd.h * dd.w) {
    copy_channels_at(src, sd, sc0, dst, dd, dc0, channels, i);
  }
}

template <class U>
__global__ void rows_copy_kernel(const U* src, U* dst, RowsCopy r) {
  GRID_LOOP(i, r.rows * r.row_units) { rows_copy_at(src, dst, r, i); }
}

template <class T>
__global__ void pad_kernel(const T* x, Dims4 in, T* y, Dims4 out, int top, int left, float value) {
  GRID_LOOP(i, out.numel()) { pad_at(x, in, y, out, top, left, value, i); }
}

template <class T>
__global__ void reflect_pad_kernel(const T* x, Dims4 in, T* y, Dims4 out, int64_t top, int64_t left) {
  GRID_LOOP(i, out.numel()) { reflect_pad_at(x, in, y, out, top, left, i); }
}

template <class T>
__global__ void space_to_depth_kernel(const T* x, Dims4 in, T* y, Dims4 out, int64_t block) {
  GRID_LOOP(i, out.numel()) { space_to_depth_at(x, in, y, out, block, i); }
}

template <class T>
__global__ void reduce_kernel(const T* x, Dims4 in, T* y, Dims4 out, ReduceMode mode) {
  GRID_LOOP(i, out.numel()) { reduce_at(x, in, y, out, mode, i); }
}

template <class TS, class TD>
__global__ void convert_kernel(const TS* src, Dims4 sd, TD* dst, Dims4 dd, float factor) {
  GRID_LOOP(i, dd.numel()) { convert_at(src, sd, dst, dd, factor, i); }
}

template <class T>
__global__ void requantize_kernel(const float* acc, Dims4 ad, const float* bias, const float* scale,
                                  Act act, float relu6_max, T* y, Dims4 yd) {
  GRID_LOOP(i, yd.numel()) { requantize_at(acc, ad, bias, scale, act, relu6_max, y, yd, i); }
}

}  // namespace


namespace {

template <class T, class Map>
void map_typed(const T* x, T* y, int64_t n, const Map& f, cudaStream_t s) {
  if (packable<T>(n, x) && packable<T>(n, y)) {
    map_pack_kernel<T, Map><<<blocks_for(n / kPack), kThreads, 0, s>>>(
        reinterpret_cast<const Pack4<T>*>(x), reinterpret_cast<Pack4<T>*>(y), n / kPack, f);
  } else {
    map_kernel<T, Map><<<blocks_for(n), kThreads, 0, s>>>(x, y, n, f);
  }
}

template <class T, class TO>
void binary_typed(const T* x, const Dims4& xd, const TO* o, const Dims4& od, T* y, const Dims4& yd,
                  const BinaryParams& p, cudaStream_t s) {
  const int64_t n = yd.numel();
  if (same_dims(xd, yd) && packable<T>(n, x) && packable<T>(n, y)) {
    binary_pack_kernel<T, TO><<<blocks_for(n / kPack), kThreads, 0, s>>>(
        reinterpret_cast<const Pack4<T>*>(x), o, od, reinterpret_cast<Pack4<T>*>(y), yd, p);
  } else {
    binary_kernel<T, TO><<<blocks_for(n), kThreads, 0, s>>>(x, xd, o, od, y, yd, p);
  }
}

template <class T>
void binary_on(const T* x, const Dims4& xd, const void* o, Elem o_elem, const Dims4& od, T* y,
               const Dims4& yd, const BinaryParams& p, cudaStream_t s) {
  if (o_elem == Elem::kF32) {
    binary_typed(x, xd, static_cast<const float*>(o), od, y, yd, p, s);
  } else {
    binary_typed(x, xd, static_cast<const T*>(o), od, y, yd, p, s);
  }
}

template <class U>
void shuffle_planes(const void* x, void* y, const ShufflePlanes& r, cudaStream_t s) {
  shuffle_planes_kernel<U><<<blocks_for(r.units()), kThreads, 0, s>>>(static_cast<const U*>(x),
                                                                      static_cast<U*>(y), r);
}

template <class T>
void bias_act_typed(T* y, const float* bias, const Dims4& d, Act act, float relu6_max, cudaStream_t s) {
  const int64_t n = d.numel();
  if (packable<T>(n, y)) {
    bias_act_pack_kernel<T><<<blocks_for(n / kPack), kThreads, 0, s>>>(
        reinterpret_cast<Pack4<T>*>(y), bias, d, act, relu6_max);
  } else {
    bias_act_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(y, bias, d, act, relu6_max);
  }
}

template <class T>
void scale_shift_typed(const T* x, T* y, const float* scale, const float* shift, const Dims4& d,
                       cudaStream_t s) {
  const int64_t n = d.numel();
  if (packable<T>(n, x) && packable<T>(n, y)) {
    scale_shift_pack_kernel<T><<<blocks_for(n / kPack), kThreads, 0, s>>>(
        reinterpret_cast<const Pack4<T>*>(x), reinterpret_cast<Pack4<T>*>(y), scale, shift, d);
  } else {
    scale_shift_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(x, y, scale, shift, d);
  }
}

template <class T>
void add_typed(const void* const* srcs, int count, T* y, int64_t n, Act act, float relu6_max,
               cudaStream_t s) {
  const int used = count < kMaxAddInputs ? count : kMaxAddInputs;
  bool pack = packable<T>(n, y);
  for (int k = 0; k < used; ++k) pack = pack && packable<T>(n, srcs[k]);
  if (pack) {
    AddInputs<Pack4<T>> in{};
    for (int k = 0; k < used; ++k) in.p[k] = static_cast<const Pack4<T>*>(srcs[k]);
    add_pack_kernel<T><<<blocks_for(n / kPack), kThreads, 0, s>>>(
        in, used, reinterpret_cast<Pack4<T>*>(y), n / kPack, act, relu6_max);
  } else {
    AddInputs<T> in{};
    for (int k = 0; k < used; ++k) in.p[k] = static_cast<const T*>(srcs[k]);
    add_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(in, used, y, n, act, relu6_max);
  }
}

template <class TS>
void convert_from(const TS* src, const Dims4& sd, Elem de, void* dst, const Dims4& dd, float factor,
                  cudaStream_t s) {
  DISPATCH(de, (convert_kernel<TS, T><<<blocks_for(dd.numel()), kThreads, 0, s>>>(
                   src, sd, static_cast<T*>(dst), dd, factor)));
}

template <class U>
void rows_copy(const void* src, void* dst, const RowsCopy& r, cudaStream_t s) {
  rows_copy_kernel<U><<<blocks_for(r.units()), kThreads, 0, s>>>(static_cast<const U*>(src),
                                                                 static_cast<U*>(dst), r);
}

template <class U>
struct UnitType {
  using type = U;
};

// Calls f(UnitType<U>{}), U the type of `unit` bytes (16, 8, 4, 2 or 1), and returns what f
// returns; false for any other unit (0: the per-element kernel copies).
template <class F>
bool with_unit_type(int unit, F&& f) {
  switch (unit) {
    case 16:
      return f(UnitType<Bytes16>{});
    case 8:
      return f(UnitType<Bytes8>{});
    case 4:
      return f(UnitType<uint32_t>{});
    case 2:
      return f(UnitType<uint16_t>{});
    case 1:
      return f(UnitType<uint8_t>{});
    default:
      return false;
  }
}

// NHWC: one thread per (n, c); NCHW: one warp per plane.
template <class R>
void launch_global_pool(Elem e, const void* x, void* y, const Dims4& in, cudaStream_t s) {
  if (in.nhwc) {
    DISPATCH(e, (global_pool_kernel<R, T><<<blocks_for(in.n * in.c), kThreads, 0, s>>>(
                    static_cast<const T*>(x), static_cast<T*>(y), in)));
  } else {
    DISPATCH(e, (global_pool_planes_kernel<R, T><<<blocks_for(in.n * in.c * kWarp), kThreads, 0, s>>>(
                    static_cast<const T*>(x), static_cast<T*>(y), in)));
  }
}

}  // namespace

void launch_bias_act(Elem e, void* y, const float* bias, const Dims4& d, Act act, float relu6_max,
                     cudaStream_t s) {
  DISPATCH(e, bias_act_typed(static_cast<T*>(y), bias, d, act, relu6_max, s));
}

void launch_act(Elem e, const void* x, void* y, int64_t n, const ActParams& act, cudaStream_t s) {
  DISPATCH(e, map_typed(static_cast<const T*>(x), static_cast<T*>(y), n, ActMap{act}, s));
}

// f32 and f16 only (the int8 contract gives binary ops no 8-bit tensors): no 8-bit instances.
void launch_binary(Elem e, const void* x, const Dims4& xd, const void* o, Elem o_elem,
                   const Dims4& od, void* y, const Dims4& yd, const BinaryParams& p, cudaStream_t s) {
  if (e == Elem::kF16) {
    binary_on(static_cast<const __half*>(x), xd, o, o_elem, od, static_cast<__half*>(y), yd, p, s);
  } else {
    binary_on(static_cast<const float*>(x), xd, o, o_elem, od, static_cast<float*>(y), yd, p, s);
  }
}

void launch_channel_shuffle(Elem e, const void* x, const Dims4& xd, void* y, const Dims4& yd,
                            int64_t groups, cudaStream_t s) {
  const ShufflePlanes r = plan_shuffle_planes(elem_bytes(e), xd, reinterpret_cast<uintptr_t>(x), yd,
                                              reinterpret_cast<uintptr_t>(y), groups);
  const auto planes = [&](auto unit) {
    shuffle_planes<typename decltype(unit)::type>(x, y, r, s);
    return true;
  };
  if (with_unit_type(r.unit, planes)) return;
  DISPATCH(e, (channel_shuffle_kernel<T><<<blocks_for(yd.numel()), kThreads, 0, s>>>(
                  static_cast<const T*>(x), xd, static_cast<T*>(y), yd, groups)));
}

void launch_resize(Elem e, const void* x, const Dims4& xd, void* y, const Dims4& yd, double scale_h,
                   double scale_w, bool linear, cudaStream_t s) {
  DISPATCH(e, (resize_kernel<T><<<blocks_for(yd.numel()), kThreads, 0, s>>>(
                  static_cast<const T*>(x), xd, static_cast<T*>(y), yd, scale_h, scale_w, linear)));
}

void launch_reshape(Elem e, const void* x, const Dims4& xd, void* y, const Dims4& yd, cudaStream_t s) {
  if (plain_order(xd) && plain_order(yd)) {  // the same bytes: one flat row
    Dims4 flat;
    flat.c = xd.numel();
    return launch_copy_channels(e, x, flat, 0, y, flat, 0, flat.c, s);
  }
  DISPATCH(e, (reshape_kernel<T><<<blocks_for(yd.numel()), kThreads, 0, s>>>(
                  static_cast<const T*>(x), xd, static_cast<T*>(y), yd)));
}

void launch_scale(Elem e, const void* x, void* y, int64_t n, float factor, cudaStream_t s) {
  DISPATCH(e, map_typed(static_cast<const T*>(x), static_cast<T*>(y), n, ScaleMap{factor}, s));
}

void launch_add(Elem e, const void* const* srcs, int count, void* y, int64_t n, Act act,
                float relu6_max, cudaStream_t s) {
  DISPATCH(e, add_typed(srcs, count, static_cast<T*>(y), n, act, relu6_max, s));
}

void launch_scale_shift(Elem e, const void* x, void* y, const float* scale, const float* shift,
                        const Dims4& d, cudaStream_t s) {
  DISPATCH(e, scale_shift_typed(static_cast<const T*>(x), static_cast<T*>(y), scale, shift, d, s));
}

void launch_pool(Elem e, const void* x, const Dims4& in, void* y, const Dims4& out,
                 const PoolParams& p, cudaStream_t s) {
  DISPATCH(e, (pool_kernel<T><<<blocks_for(out.numel()), kThreads, 0, s>>>(
                  static_cast<const T*>(x), in, static_cast<T*>(y), out, p)));
}

void launch_global_avg(Elem e, const void* x, void* y, const Dims4& in, cudaStream_t s) {
  launch_global_pool<MeanReduction>(e, x, y, in, s);
}

void launch_global_max(Elem e, const void* x, void* y, const Dims4& in, cudaStream_t s) {
  launch_global_pool<MaxReduction>(e, x, y, in, s);
}

void launch_copy_channels(Elem e, const void* src, const Dims4& src_dims, int64_t src_c0,
                          void* dst, const Dims4& dst_dims, int64_t dst_c0, int64_t channels,
                          cudaStream_t s) {
  const RowsCopy r = plan_rows_copy(elem_bytes(e), src_dims, src_c0, reinterpret_cast<uintptr_t>(src),
                                    dst_dims, dst_c0, reinterpret_cast<uintptr_t>(dst), channels);
  const auto rows = [&](auto unit) {
    rows_copy<typename decltype(unit)::type>(src, dst, r, s);
    return true;
  };
  if (with_unit_type(r.unit, rows)) return;
  const int64_t n = dst_dims.n * channels * dst_dims.h * dst_dims.w;
  DISPATCH(e, (copy_channels_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(
                  static_cast<const T*>(src), src_dims, src_c0, static_cast<T*>(dst), dst_dims,
                  dst_c0, channels)));
}

void launch_pad(Elem e, const void* x, const Dims4& in, void* y, const Dims4& out, int top,
                int left, float value, cudaStream_t s) {
  DISPATCH(e, (pad_kernel<T><<<blocks_for(out.numel()), kThreads, 0, s>>>(
                  static_cast<const T*>(x), in, static_cast<T*>(y), out, top, left, value)));
}

void launch_reflect_pad(Elem e, const void* x, const Dims4& in, void* y, const Dims4& out, int64_t top,
                        int64_t left, cudaStream_t s) {
  DISPATCH(e, (reflect_pad_kernel<T><<<blocks_for(out.numel()), kThreads, 0, s>>>(
                  static_cast<const T*>(x), in, static_cast<T*>(y), out, top, left)));
}

void launch_space_to_depth(Elem e, const void* x, const Dims4& in, void* y, const Dims4& out, int64_t block,
                           cudaStream_t s) {
  DISPATCH(e, (space_to_depth_kernel<T><<<blocks_for(out.numel()), kThreads, 0, s>>>(
                  static_cast<const T*>(x), in, static_cast<T*>(y), out, block)));
}

void launch_reduce(Elem e, const void* x, const Dims4& in, void* y, const Dims4& out, ReduceMode mode,
                   cudaStream_t s) {
  DISPATCH(e, (reduce_kernel<T><<<blocks_for(out.numel()), kThreads, 0, s>>>(
                  static_cast<const T*>(x), in, static_cast<T*>(y), out, mode)));
}

void launch_convert(Elem src_elem, const void* src, const Dims4& src_dims, Elem dst_elem, void* dst,
                    const Dims4& dst_dims, float factor, cudaStream_t s) {
  DISPATCH(src_elem, convert_from<T>(static_cast<const T*>(src), src_dims, dst_elem, dst, dst_dims,
                                     factor, s));
}

void launch_add_scaled(const void* const* srcs, const Elem* elems, const float* factors, int count,
                       Elem dst_elem, void* y, int64_t n, Act act, float relu6_max, cudaStream_t s) {
  ScaledInputs<kMaxAddInputs> in{};
  const int used = count < kMaxAddInputs ? count : kMaxAddInputs;
  for (int k = 0; k < used; ++k) {
    in.p[k] = srcs[k];
    in.elem[k] = elems[k];
    in.factor[k] = factors[k];
  }
  DISPATCH(dst_elem, (add_scaled_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(
                         in, used, static_cast<T*>(y), n, act, relu6_max)));
}

void launch_requantize(const float* acc, const Dims4& acc_dims, const float* bias,
                       const float* scale, Act act, float relu6_max, Elem dst_elem, void* y,
                       const Dims4& y_dims, cudaStream_t s) {
  DISPATCH(dst_elem, (requantize_kernel<T><<<blocks_for(y_dims.numel()), kThreads, 0, s>>>(
                         acc, acc_dims, bias, scale, act, relu6_max, static_cast<T*>(y), y_dims)));
}

}  // namespace stagecraft::executor::cuda

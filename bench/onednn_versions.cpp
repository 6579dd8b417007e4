// Single oneDNN convolutions of the models we run (depthwise and 1x1 of mobilenet_v3_small, 3x3
// of inception_v3 and resnet50, squeezenet's 1x1), compiled against oneDNN 2.x or 3.x: the
// measurement behind the README's "oneDNN 2.6 or 3.x". Not part of the build; e.g.
//   g++ -O2 -std=c++17 bench/onednn_versions.cpp -o cb26 -ldnnl                 # Debian's 2.6
//   pip download --no-deps onednn-devel-cpu-gomp onednn-cpu-gomp && unzip both  # 3.2 (GNU OpenMP)
//   g++ -O2 -std=c++17 -I$DEVEL/include bench/onednn_versions.cpp -o cb32 -L$LIB -ldnnl -Wl,-rpath,$LIB
//   OMP_NUM_THREADS=2 ./cb26 nChw8c; OMP_NUM_THREADS=2 ./cb32 nChw8c   # (and nhwc), alternating
//   OMP_NUM_THREADS=2 ./cb26 nChw16c bf16                               # bf16 activations and weights
// Prints per shape the implementation and the median of 200 runs (µs).
#include <oneapi/dnnl/dnnl.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>
using namespace dnnl;
using tag = memory::format_tag;
struct Shape { const char* name; int c, h, k, r, s, g; };
int main(int argc, char** argv) {
  engine eng(engine::kind::cpu, 0);
  stream st(eng);
  std::vector<Shape> shapes = {
      {"mbv3s dw 16x56 3x3 s2", 16, 56, 16, 3, 2, 16},  // s: stride of 3x3 kernels
      {"mbv3s dw 72x28 3x3", 72, 28, 72, 3, 1, 72},
      {"mbv3s dw 96x14 5x5", 96, 14, 96, 5, 1, 96},
      {"mbv3s dw 576x7 5x5", 576, 7, 576, 5, 1, 576},
      {"mbv3s 1x1 96->576 7", 96, 7, 576, 1, 1, 1},
      {"mbv3s 1x1 40->240 14", 40, 14, 240, 1, 1, 1},
      {"mbv3s 1x1 24->88 28", 24, 28, 88, 1, 1, 1},
      {"incv3 1x1 768->192 17", 768, 17, 192, 1, 1, 1},
      {"incv3 3x3 64->96 35", 64, 35, 96, 3, 1, 1},
      {"incv3 3x3 32->64 147", 32, 147, 64, 3, 1, 1},
      {"resnet 3x3 64->64 56", 64, 56, 64, 3, 1, 1},
      {"resnet 1x1 256->64 56", 256, 56, 64, 1, 1, 1},

      {"squeeze 1x1 128->16 55", 128, 55, 16, 1, 1, 1},
  };
  const char* lay = argc > 1 ? argv[1] : "nChw8c";
  tag t = std::string(lay) == "nhwc" ? tag::nhwc : std::string(lay) == "nChw16c" ? tag::nChw16c : tag::nChw8c;
  const memory::data_type type =
      argc > 2 && std::string(argv[2]) == "bf16" ? memory::data_type::bf16 : memory::data_type::f32;
  for (auto& sh : shapes) {
    int stride = (sh.r == 3 && sh.s == 2) ? 2 : 1;
    int pad = sh.r / 2;
    int oh = (sh.h + 2 * pad - sh.r) / stride + 1;
    memory::desc src({1, sh.c, sh.h, sh.h}, type, t);
    memory::desc dst({1, sh.k, oh, oh}, type, t);
    memory::dims wd = sh.g > 1 ? memory::dims{sh.g, sh.k / sh.g, sh.c / sh.g, sh.r, sh.r}
                               : memory::dims{sh.k, sh.c, sh.r, sh.r};
    memory::desc w(wd, type, tag::any);
    memory::desc b({sh.k}, memory::data_type::f32, tag::x);
    post_ops po;
#if DNNL_VERSION_MAJOR >= 3
    po.append_eltwise(algorithm::eltwise_relu, 0.f, 0.f);
#else
    po.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
#endif
    primitive_attr attr;
    attr.set_post_ops(po);
    attr.set_scratchpad_mode(scratchpad_mode::user);
#if DNNL_VERSION_MAJOR >= 3
    convolution_forward::primitive_desc pd(eng, prop_kind::forward_inference, algorithm::convolution_direct,
                                           src, w, b, dst, {stride, stride}, {pad, pad}, {pad, pad}, attr);
#else
    convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct, src, w, b, dst,
                                {stride, stride}, {pad, pad}, {pad, pad});
    convolution_forward::primitive_desc pd(d, attr, eng);
#endif
    memory ms(src, eng), md(dst, eng), mw(pd.weights_desc(), eng), mb(b, eng), msp(pd.scratchpad_desc(), eng);
    // (bf16: each float fills two elements, 0.5 or 0.01 and +0: no denormals either way)
    std::fill((float*)ms.get_data_handle(), (float*)ms.get_data_handle() + src.get_size() / 4, 0.5f);
    std::fill((float*)mw.get_data_handle(), (float*)mw.get_data_handle() + pd.weights_desc().get_size() / 4, 0.01f);
    convolution_forward conv(pd);
    std::vector<double> ts;
    for (int i = 0; i < 230; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      conv.execute(st, {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb}, {DNNL_ARG_DST, md},
                        {DNNL_ARG_SCRATCHPAD, msp}});
      st.wait();
      auto t1 = std::chrono::steady_clock::now();
      if (i >= 30) ts.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    std::sort(ts.begin(), ts.end());
    printf("%-40s %-28s %8.1f us\n", sh.name, pd.impl_info_str(), ts[ts.size() / 2]);
  }
}

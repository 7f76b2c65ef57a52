#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/python_variable.h>
#include <Python.h>
#include <ATen/ops/empty.h>
using namespace torch::autograd;
typedef int (*entry_t)(void* const*, void* const*);
static entry_t FW, BW; static void* const* FF; static void* const* BF;
extern "C" void init(void* fw, void* ff, void* bw, void* bf) {
  FW = (entry_t)fw; FF = (void* const*)ff; BW = (entry_t)bw; BF = (void* const*)bf;
}
struct Step : public Function<Step> {
  static variable_list forward(AutogradContext* ctx, at::Tensor x, at::Tensor w1, at::Tensor b1, at::Tensor w2, at::Tensor b2) {
    auto opts = x.options();
    at::Tensor out = at::empty({32, 10}, opts), h = at::empty({32, 32}, opts);
    void* p[7] = {w1.data_ptr(), b1.data_ptr(), x.data_ptr(), w2.data_ptr(), b2.data_ptr(), out.data_ptr(), h.data_ptr()};
    if (FW(FF, p)) throw std::runtime_error("fw declined");
    ctx->save_for_backward({x, w2});
    ctx->saved_data["h"] = h;
    return {out};
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    auto s = ctx->get_saved_variables();
    at::Tensor h = ctx->saved_data["h"].toTensor();
    at::Tensor w2t = s[1].t().contiguous();
    at::Tensor gg = g[0].contiguous();
    auto opts = gg.options();
    at::Tensor d0 = at::empty({32, 64}, opts), d1 = at::empty({32}, opts), d2 = at::empty({10, 32}, opts), d3 = at::empty({10}, opts);
    void* p[9] = {s[0].data_ptr(), h.data_ptr(), h.data_ptr(), w2t.data_ptr(), gg.data_ptr(), d0.data_ptr(), d1.data_ptr(), d2.data_ptr(), d3.data_ptr()};
    if (BW(BF, p)) throw std::runtime_error("bw declined");
    return {at::Tensor(), d0, d1, d2, d3};
  }
};
extern "C" PyObject* step(PyObject* args) {
  auto out = Step::apply(THPVariable_Unpack(PyTuple_GET_ITEM(args, 0)), THPVariable_Unpack(PyTuple_GET_ITEM(args, 1)),
                         THPVariable_Unpack(PyTuple_GET_ITEM(args, 2)), THPVariable_Unpack(PyTuple_GET_ITEM(args, 3)),
                         THPVariable_Unpack(PyTuple_GET_ITEM(args, 4)));
  return THPVariable_Wrap(out[0]);
}

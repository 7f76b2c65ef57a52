// axgraph: the thin runtime's autograd node in C++ (read by thin_node.py, which says why).
//
// A plan (make_plan) describes one plain graph pair whose forward and backward each run as
// one native C step: the forward's arguments (dtype, shape), which of them the forward's C
// reads, its results, which results and arguments (possibly permuted) it hands the user and
// saves for the backward, and the same for the backward. call(plan, args) checks every
// argument against the plan and returns None where one does not match (the Python thin
// runtime then runs the call); else it applies the node: the forward's C on the tensors'
// data pointers, results made by at::empty, the saved values kept by save_for_backward
// (autograd's own version checks and saved-tensor hooks), and at the backward the
// backward's C on the saved values and the outputs' gradients.
#include <Python.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/Exceptions.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

typedef int (*step_t)(void* const*, void* const*);

struct Spec {
    at::ScalarType dtype;
    std::vector<int64_t> shape;
};

/* An output: a result of the step (RESULT), an argument of the call (ARGUMENT), or no
   value (NONE); viewed permuted where `permutation` is not empty. */
enum Kind { RESULT = 0, ARGUMENT = 1, NONE = 2 };
struct Out {
    int kind;
    int64_t index;
    std::vector<int64_t> permutation;
};

struct Step {
    step_t entry;
    void* const* fixed;
    std::vector<int64_t> reads;  /* the C step's parameters: positions among its inputs */
    std::vector<Spec> results;
};

/* Whether Python is shutting down (the name is public from 3.13). */
static bool finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

struct Plan {
    std::vector<Spec> arguments;  /* the forward's */
    Step forward, backward;
    std::vector<Out> outputs;     /* the forward's: the user's first, then the saved */
    int64_t user;
    std::vector<Spec> tangents;   /* the user outputs' gradients, as the backward reads them */
    std::vector<Out> gradients;   /* the backward's, one per forward argument */
    /* What the steps' fixed pointers address (their arenas), and the error a second
       derivative raises: Python objects this plan holds a reference to. */
    PyObject* owner = nullptr;
    PyObject* refusal = nullptr;

    ~Plan() {
        if (!Py_IsInitialized() || finalizing()) return;  /* the process is ending */
        PyGILState_STATE state = PyGILState_Ensure();
        Py_XDECREF(owner);
        Py_XDECREF(refusal);
        PyGILState_Release(state);
    }
};

/* What a node keeps in its saved data, as one capsule: the plan (so that the plan, and the
   arenas its steps write, live as long as the node) and the forward's arguments (which a
   refused second derivative hangs on). */
struct Kept : public torch::CustomClassHolder {
    std::shared_ptr<Plan> plan;
    std::vector<at::Tensor> arguments;
};

static c10::intrusive_ptr<Kept> kept(AutogradContext* ctx) {
    return c10::static_intrusive_pointer_cast<Kept>(ctx->saved_data["kept"].toCapsule());
}

static bool matches(const at::Tensor& tensor, const Spec& spec) {
    return tensor.scalar_type() == spec.dtype && tensor.sizes().equals(spec.shape) &&
           tensor.is_contiguous() && tensor.device().is_cpu() && tensor.layout() == at::kStrided;
}

static std::vector<at::Tensor> run(const Step& step, const std::vector<at::Tensor>& inputs) {
    std::vector<at::Tensor> results;
    results.reserve(step.results.size());
    std::vector<void*> pointers;
    pointers.reserve(step.reads.size() + step.results.size());
    for (int64_t i : step.reads) pointers.push_back(inputs[i].data_ptr());
    for (const Spec& spec : step.results) {
        results.push_back(at::empty(spec.shape, at::TensorOptions().dtype(spec.dtype)));
        pointers.push_back(results.back().data_ptr());
    }
    if (step.entry(step.fixed, pointers.data()) != 0)
        throw std::runtime_error("axgraph: a native step declined arrays its plan checked");
    return results;
}

static at::Tensor output(const Out& out, const std::vector<at::Tensor>& results,
                         const std::vector<at::Tensor>& arguments) {
    if (out.kind == NONE) return at::Tensor();
    const at::Tensor& value = out.kind == RESULT ? results[out.index] : arguments[out.index];
    return out.permutation.empty() ? value : value.permute(out.permutation);
}

/* The compiled backward's gradients, from a node that refuses to differentiate them again
   (the compiled backward has no backward of its own): it hangs on the outputs' gradients
   and the forward's arguments, so that every path from the gradients back meets it. */
struct Refusal : public torch::autograd::Function<Refusal> {
    static variable_list forward(AutogradContext* ctx, c10::IValue node, at::TensorList gradients,
                                 at::TensorList reached) {
        ctx->saved_data["kept"] = node;
        return variable_list(gradients.begin(), gradients.end());
    }

    static variable_list backward(AutogradContext* ctx, variable_list) {
        const Plan* plan = kept(ctx)->plan.get();
        pybind11::gil_scoped_acquire gil;
        PyErr_SetString(plan->refusal,
                        "the torch bridge's compiled backward cannot be differentiated again "
                        "(double backward, create_graph=True); compute higher derivatives in "
                        "eager PyTorch");
        throw python_error();
    }
};

struct Node : public torch::autograd::Function<Node> {
    static variable_list forward(AutogradContext* ctx, const std::shared_ptr<Plan>* shared,
                                 at::TensorList list) {
        const Plan* plan = shared->get();
        std::vector<at::Tensor> arguments(list.begin(), list.end());
        std::vector<at::Tensor> results = run(plan->forward, arguments);
        variable_list user, saved;
        for (size_t k = 0; k < plan->outputs.size(); ++k) {
            at::Tensor value = output(plan->outputs[k], results, arguments);
            if (static_cast<int64_t>(k) < plan->user)
                user.push_back(value);
            else  /* a saved view detached (sharing its version counter), as AOTAutograd does */
                saved.push_back(value.is_view() ? value.detach() : value);
        }
        ctx->save_for_backward(saved);
        auto node = c10::make_intrusive<Kept>();
        node->plan = *shared;
        node->arguments = std::move(arguments);
        ctx->saved_data["kept"] = c10::IValue::make_capsule(std::move(node));
        return user;
    }

    static variable_list backward(AutogradContext* ctx, variable_list grads) {
        c10::intrusive_ptr<Kept> node = kept(ctx);
        const Plan* plan = node->plan.get();
        std::vector<at::Tensor> inputs;
        for (const at::Tensor& value : ctx->get_saved_variables())
            inputs.push_back(value.contiguous());
        for (size_t t = 0; t < grads.size(); ++t) {
            at::Tensor grad = grads[t].defined() ? grads[t].contiguous()
                : at::zeros(plan->tangents[t].shape,
                            at::TensorOptions().dtype(plan->tangents[t].dtype));
            if (!matches(grad, plan->tangents[t]))
                throw std::runtime_error("axgraph: an output's gradient is not of its output's "
                                         "dtype and shape");
            inputs.push_back(grad);
        }
        std::vector<at::Tensor> results;
        {
            at::NoGradGuard steps_only;
            results = run(plan->backward, inputs);
        }
        variable_list gradients{at::Tensor()};  /* none for the plan */
        variable_list computed;
        for (const Out& out : plan->gradients) computed.push_back(output(out, results, inputs));
        if (at::GradMode::is_enabled()) {  /* create_graph=True: gradients whose backward refuses */
            variable_list defined, grads_in;
            for (const at::Tensor& g : computed) if (g.defined()) defined.push_back(g);
            for (const at::Tensor& g : grads) if (g.defined()) grads_in.push_back(g);
            std::vector<at::Tensor> reached = grads_in;
            for (const at::Tensor& a : node->arguments) reached.push_back(a);
            variable_list refused = Refusal::apply(
                ctx->saved_data["kept"], at::TensorList(defined), at::TensorList(reached));
            size_t next = 0;
            for (at::Tensor& g : computed) if (g.defined()) g = refused[next++];
        }
        for (const at::Tensor& g : computed) gradients.push_back(g);
        return gradients;
    }
};

/* --- the calls from Python (ctypes, holding the GIL) --------------------------------- */

static std::vector<int64_t> take(const int64_t*& at) {
    int64_t n = *at++;
    std::vector<int64_t> values(at, at + n);
    at += n;
    return values;
}

static Spec take_spec(const int64_t*& at) {
    Spec spec;
    spec.dtype = static_cast<at::ScalarType>(*at++);
    spec.shape = take(at);
    return spec;
}

static std::vector<Spec> take_specs(const int64_t*& at) {
    std::vector<Spec> specs(*at++);
    for (Spec& spec : specs) spec = take_spec(at);
    return specs;
}

static std::vector<Out> take_outs(const int64_t*& at) {
    std::vector<Out> outs(*at++);
    for (Out& out : outs) {
        out.kind = static_cast<int>(*at++);
        out.index = *at++;
        out.permutation = take(at);
    }
    return outs;
}

static Step take_step(const int64_t*& at, void* entry, void* fixed) {
    Step step;
    step.entry = reinterpret_cast<step_t>(entry);
    step.fixed = static_cast<void* const*>(fixed);
    step.reads = take(at);
    step.results = take_specs(at);
    return step;
}

/* A new plan, as a heap-held shared pointer (axgraph_thin_free drops it); `owner` keeps
   what the steps' fixed pointers address alive, `refusal` is the error class a second
   derivative raises. */
extern "C" void* axgraph_thin_plan(const int64_t* code, void* forward, void* forward_fixed,
                                   void* backward, void* backward_fixed, PyObject* owner,
                                   PyObject* refusal) {
    auto plan = std::make_shared<Plan>();
    Py_INCREF(owner);
    Py_INCREF(refusal);
    plan->owner = owner;
    plan->refusal = refusal;
    plan->arguments = take_specs(code);
    plan->forward = take_step(code, forward, forward_fixed);
    plan->outputs = take_outs(code);
    plan->user = *code++;
    plan->tangents = take_specs(code);
    plan->backward = take_step(code, backward, backward_fixed);
    plan->gradients = take_outs(code);
    return new std::shared_ptr<Plan>(plan);
}

extern "C" void axgraph_thin_free(void* plan) {
    delete static_cast<std::shared_ptr<Plan>*>(plan);
}

/* The user outputs as a tuple, or None where an argument does not match the plan; NULL
   with a Python error set where the node raised. */
extern "C" PyObject* axgraph_thin_call(void* handle, PyObject* args) {
    const auto* shared = static_cast<const std::shared_ptr<Plan>*>(handle);
    const Plan* plan = shared->get();
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n != static_cast<Py_ssize_t>(plan->arguments.size())) Py_RETURN_NONE;
    variable_list arguments;
    arguments.reserve(n);
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* item = PyTuple_GET_ITEM(args, i);
        if (!THPVariable_Check(item)) Py_RETURN_NONE;
        const at::Tensor& tensor = THPVariable_Unpack(item);
        if (!matches(tensor, plan->arguments[i])) Py_RETURN_NONE;
        arguments.push_back(tensor);
    }
    try {
        variable_list outputs = Node::apply(shared, at::TensorList(arguments));
        PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(outputs.size()));
        if (tuple == nullptr) return nullptr;
        for (size_t k = 0; k < outputs.size(); ++k)
            PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(k), THPVariable_Wrap(outputs[k]));
        return tuple;
    } catch (python_error& error) {
        error.restore();
        return nullptr;
    } catch (const std::exception& error) {
        PyErr_SetString(PyExc_RuntimeError, error.what());
        return nullptr;
    }
}

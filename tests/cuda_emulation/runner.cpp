// Runs one launch of one of memctl's CUDA kernels under emu.h, as described in a launch file:
//
//   kernel NAME          the kernel (kernel_source.cu holds every kernel file, each in a
//                        namespace of its own; kernels.inc lists them as KERNEL(namespace, name))
//   grid X Y Z           blocks
//   block X Y Z          threads per block
//   shared BYTES         dynamic shared memory
//   then one line per argument, in order:
//   f32 FILE             a buffer of floats read from FILE (raw f32), written back to FILE.out
//   f32new COUNT FILE    a new buffer of COUNT floats, NaN-filled, written to FILE.out
//   f64new COUNT         a new scratch buffer of COUNT doubles, NaN-filled
//   null                 a null pointer
//   i32 VALUE            an int
//   f32v VALUE           a float
//   parts FILE...        sum_parts.cu's struct of 32 pointers, to buffers read from the FILEs
//
// Each argument is checked against the kernel's parameter (a pointer, an int, a float or a
// struct, and a pointer's element size), so a launcher that passes them in another order or of
// another type fails here as it would corrupt memory on a GPU.
//
//   runner LAUNCH_FILE   (the FILEs are relative to the launch file's folder)

#include <array>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

#include "kernel_source.cu"

namespace {

enum class Kind { Pointer, Int, Float, Struct };

struct Arg {
    Kind kind;
    size_t element_bytes = 0;  // a pointer's element size (0: any)
    std::vector<unsigned char> value;
};

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "runner: %s\n", what.c_str());
    std::exit(2);
}

template <class A>
A take(const Arg& arg, size_t index) {
    using T = std::remove_cv_t<A>;
    const auto where = "argument " + std::to_string(index) + ": ";
    if constexpr (std::is_pointer_v<T>) {
        if (arg.kind != Kind::Pointer) die(where + "the kernel takes a pointer");
        using Element = std::remove_cv_t<std::remove_pointer_t<T>>;
        if constexpr (!std::is_void_v<Element>) {
            if (arg.element_bytes != 0 && arg.element_bytes != sizeof(Element))
                die(where + "a buffer of " + std::to_string(arg.element_bytes) + "-byte elements for a pointer to " +
                    std::to_string(sizeof(Element)) + "-byte ones");
        }
    } else if constexpr (std::is_integral_v<T>) {
        if (arg.kind != Kind::Int) die(where + "the kernel takes an integer");
    } else if constexpr (std::is_floating_point_v<T>) {
        if (arg.kind != Kind::Float) die(where + "the kernel takes a float");
    } else {
        if (arg.kind != Kind::Struct) die(where + "the kernel takes a struct");
    }
    if (arg.value.size() != sizeof(T))
        die(where + std::to_string(arg.value.size()) + " bytes for a parameter of " + std::to_string(sizeof(T)));
    T out;
    std::memcpy(&out, arg.value.data(), sizeof(T));
    return out;
}

struct Launch {
    dim3 grid, block;
    unsigned shared = 0;
};

using Invoker = std::function<void(const std::vector<Arg>&, const Launch&)>;

template <class... A, size_t... I>
void check(const std::vector<Arg>& args, std::index_sequence<I...>) {
    ((void)take<A>(args[I], I), ...);
}

template <class... A, size_t... I>
void call(void (*kernel)(A...), const std::vector<Arg>& args, std::index_sequence<I...>) {
    kernel(take<A>(args[I], I)...);
}

template <class... A>
Invoker invoker(void (*kernel)(A...)) {
    return [kernel](const std::vector<Arg>& args, const Launch& launch) {
        if (args.size() != sizeof...(A))
            die(std::to_string(args.size()) + " arguments for a kernel of " + std::to_string(sizeof...(A)));
        check<A...>(args, std::index_sequence_for<A...>{});  // before any thread runs
        emu::launch([&] { call(kernel, args, std::index_sequence_for<A...>{}); }, launch.grid, launch.block,
                    launch.shared);
    };
}

const std::map<std::string, Invoker>& kernels() {
    static const std::map<std::string, Invoker> all = {
#define KERNEL(file, name) {#name, invoker(file::name)},
#include "kernels.inc"
#undef KERNEL
    };
    return all;
}

template <class T>
std::vector<T> read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) die("cannot read " + path);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.size() % sizeof(T) != 0) die(path + " is not a whole number of elements");
    std::vector<T> out(bytes.size() / sizeof(T));
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
}

// A buffer in "device memory": its own heap block, so that AddressSanitizer sees an access
// past its end.
struct Buffer {
    std::string file;  // empty: scratch, not written back
    std::unique_ptr<float[]> f32;
    std::unique_ptr<double[]> f64;
    size_t count = 0;
};

// An argument of `kind` holding `value`'s bytes.
template <class T>
Arg arg_of(Kind kind, const T& value, size_t element_bytes = 0) {
    Arg a{kind, element_bytes, std::vector<unsigned char>(sizeof value)};
    std::memcpy(a.value.data(), &value, sizeof value);
    return a;
}

Arg pointer_arg(const void* p, size_t element_bytes) { return arg_of(Kind::Pointer, p, element_bytes); }

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) die("usage: runner LAUNCH_FILE");
    const std::string launch_file = argv[1];
    const std::string dir = launch_file.substr(0, launch_file.find_last_of('/') + 1);
    std::ifstream in(launch_file);
    if (!in) die("cannot read " + launch_file);
    std::string kernel_name;
    Launch launch;
    std::vector<Arg> args;
    std::vector<std::unique_ptr<Buffer>> buffers;
    auto load = [&](const std::string& file) {
        auto b = std::make_unique<Buffer>();
        b->file = file;
        auto values = read_file<float>(dir + file);
        b->count = values.size();
        b->f32.reset(new float[std::max<size_t>(b->count, 1)]);
        std::copy(values.begin(), values.end(), b->f32.get());
        buffers.push_back(std::move(b));
        return buffers.back()->f32.get();
    };
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream words(line);
        std::string what;
        if (!(words >> what)) continue;
        if (what == "kernel") {
            words >> kernel_name;
        } else if (what == "grid") {
            words >> launch.grid.x >> launch.grid.y >> launch.grid.z;
        } else if (what == "block") {
            words >> launch.block.x >> launch.block.y >> launch.block.z;
        } else if (what == "shared") {
            words >> launch.shared;
        } else if (what == "f32") {
            std::string file;
            words >> file;
            args.push_back(pointer_arg(load(file), sizeof(float)));
        } else if (what == "f32new") {
            auto b = std::make_unique<Buffer>();
            words >> b->count >> b->file;
            b->f32.reset(new float[std::max<size_t>(b->count, 1)]);
            std::fill(b->f32.get(), b->f32.get() + b->count, std::nanf(""));
            args.push_back(pointer_arg(b->f32.get(), sizeof(float)));
            buffers.push_back(std::move(b));
        } else if (what == "f64new") {
            auto b = std::make_unique<Buffer>();
            words >> b->count;
            b->f64.reset(new double[std::max<size_t>(b->count, 1)]);
            std::fill(b->f64.get(), b->f64.get() + b->count, std::nan(""));
            args.push_back(pointer_arg(b->f64.get(), sizeof(double)));
            buffers.push_back(std::move(b));
        } else if (what == "null") {
            args.push_back(pointer_arg(nullptr, 0));
        } else if (what == "i32") {
            int v;
            words >> v;
            args.push_back(arg_of(Kind::Int, v));
        } else if (what == "f32v") {
            float v;
            words >> v;
            args.push_back(arg_of(Kind::Float, v));
        } else if (what == "parts") {
            std::array<const float*, 32> pointers{};
            std::string file;
            size_t k = 0;
            while (words >> file) {
                if (k == pointers.size()) die("more than 32 parts");
                pointers[k++] = load(file);
            }
            args.push_back(arg_of(Kind::Struct, pointers));
        } else {
            die("unknown line: " + line);
        }
    }
    const auto found = kernels().find(kernel_name);
    if (found == kernels().end()) die("no kernel " + kernel_name + " in this file");
    found->second(args, launch);
    for (const auto& b : buffers) {
        if (b->file.empty() || !b->f32) continue;
        std::ofstream out(dir + b->file + ".out", std::ios::binary);
        out.write(reinterpret_cast<const char*>(b->f32.get()), b->count * sizeof(float));
        if (!out) die("cannot write " + b->file + ".out");
    }
    return 0;
}

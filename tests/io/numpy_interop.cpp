// Interchange with NumPy, an independent implementation of the formats' readers and
// writers: numpy reads xlite's .npy and .npz files, and a safetensors reader written in
// Python (json + numpy, as the format's description says) reads xlite's safetensors; xlite
// reads numpy's np.save files (C and Fortran order), np.savez and np.savez_compressed
// archives, and that Python writer's safetensors. Both
// sides compute the expected elements from the same formula, each on its own. Skipped,
// with a warning, where python3 or numpy is missing (scripts/install-deps.sh installs
// python3-numpy).

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "io_check.hpp"
#include "xlite/io/npy.hpp"
#include "xlite/io/npz.hpp"
#include "xlite/io/safetensors.hpp"

using xlite::any_tensor;
using xlite::dtype;
using xlite_test::scratch_directory;
using xlite_test::write_bytes;

namespace {

// The script: `check DIR` reads what xlite wrote, `write DIR` writes what xlite reads.
constexpr const char* script = R"PY(
import json, struct, sys
import numpy as np

kinds = {"bool": "|b1", "uint8": "|u1", "int8": "|i1", "int32": "<i4", "int64": "<i8",
         "float16": "<f2", "float32": "<f4", "float64": "<f8"}
safetensors_names = {"bool": "BOOL", "uint8": "U8", "int8": "I8", "int32": "I32", "int64": "I64",
                     "float16": "F16", "float32": "F32", "float64": "F64"}
shapes = [(2, 3), (4,), (), (0, 3), (2, 3, 4)]

def expected(kind, shape):
    i = np.arange(int(np.prod(shape)), dtype=np.int64)
    v = (i * 37 + 11) % 251
    if kind == "bool":
        a = i % 3 == 0
    elif kind == "uint8":
        a = v.astype(np.uint8)
    elif kind in ("int8", "int32", "int64"):
        a = (v - 100).astype(kinds[kind])
    else:
        a = ((v - 100) / 4).astype(kinds[kind])
    return a.reshape(shape)

def bf16_bits(shape):  # bfloat16 as the upper half of float32's bits
    return (expected("float32", shape).view(np.uint32) >> 16).astype(np.uint16)

def name(kind, shape):
    return kind + "_" + "x".join(str(d) for d in shape)

def read_safetensors(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for key, info in header.items():
        if key == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dt = {"BF16": "<u2"}.get(info["dtype"]) or kinds[[k for k, s in safetensors_names.items() if s == info["dtype"]][0]]
        out[key] = np.frombuffer(body[begin:end], dtype=dt).reshape(info["shape"])
    return out, header.get("__metadata__", {})

def check(d):
    for kind in kinds:
        for shape in shapes:
            a = np.load(f"{d}/{name(kind, shape)}.npy")
            assert a.dtype == np.dtype(kinds[kind]), (kind, a.dtype)
            assert a.shape == shape, (kind, a.shape, shape)
            assert np.array_equal(a, expected(kind, shape)), (kind, shape)
    tensors, metadata = read_safetensors(f"{d}/xlite.safetensors")
    assert metadata == {"written by": "xlite"}, metadata
    for kind in kinds:
        for shape in shapes:
            t = tensors[name(kind, shape)]
            assert t.shape == shape and np.array_equal(t, expected(kind, shape)), (kind, shape)
    for shape in shapes:
        assert np.array_equal(tensors[name("bfloat16", shape)], bf16_bits(shape)), shape
    for shape in shapes:  # bfloat16 as np.save writes ml_dtypes' bfloat16: a 2-byte void
        a = np.load(f"{d}/{name('bfloat16', shape)}.npy")
        assert a.dtype == np.dtype("V2") and a.shape == shape, (a.dtype, a.shape)
        assert np.array_equal(a.view("<u2"), bf16_bits(shape)), shape
    with np.load(f"{d}/xlite.npz") as archive:
        assert sorted(archive.files) == sorted(name(k, s) for k in kinds for s in shapes), archive.files
        for kind in kinds:
            for shape in shapes:
                a = archive[name(kind, shape)]
                assert a.dtype == np.dtype(kinds[kind]) and np.array_equal(a, expected(kind, shape)), (kind, shape)

def write(d):
    for kind in kinds:
        for shape in shapes:
            np.save(f"{d}/{name(kind, shape)}.npy", expected(kind, shape))
    np.save(f"{d}/fortran.npy", np.asfortranarray(expected("float32", (2, 3, 4))))
    for shape in shapes:
        np.save(f"{d}/{name('bfloat16', shape)}.npy", bf16_bits(shape).view("V2"))
    arrays = {name(k, s): expected(k, s) for k in kinds for s in shapes}
    np.savez(f"{d}/numpy.npz", **arrays)
    np.savez_compressed(f"{d}/compressed.npz", **arrays)
    header, chunks, offset = {"__metadata__": {"written by": "python"}}, [], 0
    entries = [(name(k, s), safetensors_names[k], expected(k, s)) for k in kinds for s in shapes]
    entries += [(name("bfloat16", s), "BF16", bf16_bits(s)) for s in shapes]
    for key, dt, a in entries:
        raw = a.tobytes()
        header[key] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    with open(f"{d}/python.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))

{"check": check, "write": write}[sys.argv[1]](sys.argv[2])
)PY";

const xlite::shape shapes[] = {{2, 3}, {4}, {}, {0, 3}, {2, 3, 4}};

std::string name_of(std::string_view kind, const xlite::shape& s) {
  std::string out = std::string(kind) + "_";
  for (std::size_t i = 0; i < s.rank(); ++i) out += (i ? "x" : "") + std::to_string(s.dims()[i]);
  return out;
}

// The same formula as the script's `expected`, computed here.
any_tensor expected(dtype type, const xlite::shape& s) {
  any_tensor t(type, s);
  xlite::visit_dtype(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = t.get<T>().data();
    for (std::int64_t i = 0; i < s.numel(); ++i) {
      const std::int64_t v = (i * 37 + 11) % 251;
      if constexpr (std::is_same_v<T, bool>) {
        out[i] = i % 3 == 0;
      } else if constexpr (std::is_same_v<T, std::uint8_t>) {
        out[i] = static_cast<T>(v);
      } else if constexpr (std::is_integral_v<T>) {
        out[i] = static_cast<T>(v - 100);
      } else {
        out[i] = T(static_cast<float>(v - 100) / 4.0f);
      }
    }
  });
  return t;
}

bool numpy_present() {
  if (std::string(XLITE_PYTHON3).empty()) return false;
  return std::system((std::string(XLITE_PYTHON3) + " -c 'import numpy' 2>/dev/null").c_str()) == 0;
}

int run_script(const scratch_directory& dir, const char* mode) {
  write_bytes(dir / "interop.py", script);
  return std::system((std::string(XLITE_PYTHON3) + " '" + (dir / "interop.py").string() + "' " + mode + " '" +
                      dir.path().string() + "'")
                         .c_str());
}

constexpr dtype numpy_dtypes[] = {dtype::boolean, dtype::u8,  dtype::i8,  dtype::i32,
                                  dtype::i64,     dtype::f16, dtype::f32, dtype::f64};

} // namespace

TEST_CASE("numpy reads xlite's .npy and safetensors files", "[io][numpy]") {
  if (!numpy_present()) {
    WARN("skipped: python3 with numpy is not installed (scripts/install-deps.sh installs python3-numpy)");
    return;
  }
  scratch_directory dir;
  std::map<std::string, any_tensor> all;
  for (const dtype type : numpy_dtypes) {
    for (const auto& s : shapes) {
      xlite::save_npy(dir / (name_of(name(type), s) + ".npy"), expected(type, s));
      all.emplace(name_of(name(type), s), expected(type, s));
    }
  }
  for (const auto& s : shapes) {
    all.emplace(name_of("bfloat16", s), expected(dtype::bf16, s));
    xlite::save_npy(dir / (name_of("bfloat16", s) + ".npy"), expected(dtype::bf16, s));
  }
  xlite::save(dir / "xlite.safetensors", all, {{"written by", "xlite"}});
  std::erase_if(all, [](const auto& entry) { return entry.second.type() == dtype::bf16; });
  xlite::save_npz(dir / "xlite.npz", all);
  CHECK(run_script(dir, "check") == 0);
}

TEST_CASE("xlite reads numpy's .npy files and a Python-written safetensors file", "[io][numpy]") {
  if (!numpy_present()) {
    WARN("skipped: python3 with numpy is not installed (scripts/install-deps.sh installs python3-numpy)");
    return;
  }
  scratch_directory dir;
  REQUIRE(run_script(dir, "write") == 0);
  const xlite::tensor_map from_python = xlite::load(dir / "python.safetensors");
  CHECK(xlite::load_metadata(dir / "python.safetensors") == xlite::tensor_metadata{{"written by", "python"}});
  for (const dtype type : numpy_dtypes) {
    for (const auto& s : shapes) {
      INFO(name(type) << " of shape " << s);
      CHECK(xlite::load_npy(dir / (name_of(name(type), s) + ".npy")) == expected(type, s));
      CHECK(from_python.at(name_of(name(type), s)) == expected(type, s));
    }
  }
  for (const auto& s : shapes) CHECK(from_python.at(name_of("bfloat16", s)) == expected(dtype::bf16, s));
  CHECK(xlite::load_npy(dir / "fortran.npy") == expected(dtype::f32, {2, 3, 4}));
  for (const auto& s : shapes)
    CHECK(xlite::load_npy(dir / (name_of("bfloat16", s) + ".npy")) == expected(dtype::bf16, s));
  for (const char* archive : {"numpy.npz", "compressed.npz"}) {
    INFO(archive);
    const xlite::tensor_map arrays = xlite::load_npz(dir / archive);
    CHECK(arrays.size() == std::size(numpy_dtypes) * std::size(shapes));
    for (const dtype type : numpy_dtypes) {
      for (const auto& s : shapes) CHECK(arrays.at(name_of(name(type), s)) == expected(type, s));
    }
  }
}

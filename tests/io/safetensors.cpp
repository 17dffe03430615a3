// save() and load() in the safetensors format: round trips of every dtype and rank, the
// exact bytes the format prescribes, files written by hand from the format's description,
// and lazy tensors computed in one launch and streamed from their devices.

#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <string>

#include "io_check.hpp"
#include "xlite/io/safetensors.hpp"
#include "xlite/lazy.hpp"

using xlite::any_tensor;
using xlite::dtype;
using xlite::tensor;
using xlite_test::little_endian;
using xlite_test::read_bytes;
using xlite_test::scratch_directory;
using xlite_test::write_bytes;

TEST_CASE("safetensors: every dtype, rank 0 to 5 and empty tensors round-trip bit for bit", "[io][safetensors]") {
  scratch_directory dir;
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    std::mt19937_64 rng(seed);
    std::map<std::string, any_tensor> saved;
    for (const dtype type : xlite_test::all_dtypes) {
      const int copies = std::uniform_int_distribution<int>(0, 2)(rng);
      for (int i = 0; i < copies; ++i) {
        saved.emplace(std::string(name(type)) + "/" + std::to_string(i),
                      xlite_test::random_tensor(type, xlite_test::random_shape(rng), rng));
      }
    }
    const xlite::tensor_metadata metadata{{"seed", std::to_string(seed)}, {"format", "pt"}};
    xlite::save(dir / "all.safetensors", saved, seed % 2 ? metadata : xlite::tensor_metadata{});
    const xlite::tensor_map loaded = xlite::load(dir / "all.safetensors");
    INFO("seed " << seed);
    REQUIRE(loaded.size() == saved.size());
    for (const auto& [name, t] : saved) {
      INFO(name << " of shape " << t.shape());
      const any_tensor& back = loaded.at(name);
      CHECK(back.type() == t.type());
      CHECK(back.shape() == t.shape());
      CHECK(std::equal(back.bytes().begin(), back.bytes().end(), t.bytes().begin(), t.bytes().end()));
    }
    CHECK(xlite::load_metadata(dir / "all.safetensors") == (seed % 2 ? metadata : xlite::tensor_metadata{}));
  }
  CHECK(dir.files() == std::vector<std::string>{"all.safetensors"}); // no temporary file left
}

TEST_CASE("safetensors: the bytes are the format's, widest dtype first and 8-byte aligned", "[io][safetensors]") {
  scratch_directory dir;
  const tensor<std::int8_t> b{1, -2, 3};
  const tensor<float> a = tensor<float>{1.5f, -2.0f}.reshaped({2, 1});
  xlite::save(dir / "two.safetensors", {{"b", b}, {"a", a}}, {{"format", "pt"}});

  std::string header = R"({"__metadata__":{"format":"pt"},)"
                       R"("a":{"dtype":"F32","shape":[2,1],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"I8","shape":[3],"data_offsets":[8,11]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  const std::string data = std::string("\x00\x00\xc0\x3f\x00\x00\x00\xc0", 8) + "\x01\xfe\x03";
  CHECK(read_bytes(dir / "two.safetensors") == little_endian(header.size(), 8) + header + data);
}

TEST_CASE("safetensors: a file written by hand from the format's description loads", "[io][safetensors]") {
  scratch_directory dir;
  // Key and field order of another writer, white space, an escaped name, no metadata, a
  // rank-0 tensor and an empty one; bfloat16 0x3FC0 is 1.5.
  const std::string header = "{ \"empty\" : {\"shape\": [0, 3], \"dtype\": \"F64\", \"data_offsets\": [6, 6]},\n"
                             "  \"s\\u00e9\\\"q\": {\"data_offsets\": [0, 4], \"dtype\": \"BF16\", \"shape\": [2]},\n"
                             "  \"flag\": {\"dtype\": \"BOOL\", \"shape\": [], \"data_offsets\": [4, 5]},\n"
                             "  \"i\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [5, 6]} }";
  write_bytes(dir / "hand.safetensors",
              little_endian(header.size(), 8) + header + std::string("\xc0\x3f\x00\xc0\x01\xff", 6));
  const xlite::tensor_map loaded = xlite::load(dir / "hand.safetensors");
  REQUIRE(loaded.size() == 4);
  const auto& seq = loaded.at("s\xc3\xa9\"q").get<xlite::bfloat16>();
  CHECK(seq.shape() == xlite::shape{2});
  CHECK(static_cast<float>(seq(0)) == 1.5f);
  CHECK(static_cast<float>(seq(1)) == -2.0f);
  CHECK(loaded.at("flag").get<bool>().shape() == xlite::shape{});
  CHECK(loaded.at("flag").get<bool>()() == true);
  CHECK(loaded.at("i").get<std::uint8_t>()(0) == 255);
  CHECK(loaded.at("empty").get<double>().shape() == xlite::shape{0, 3});
  CHECK(xlite::load_metadata(dir / "hand.safetensors").empty());
}

TEST_CASE("safetensors: names and metadata with quotes, backslashes, control and non-ASCII characters",
          "[io][safetensors]") {
  scratch_directory dir;
  const std::string odd = "la\"yer\\1\n\t\x01/\xe2\x82\xac";
  const tensor<float> w{1, 2};
  xlite::save(dir / "odd.safetensors", {{odd, w}}, {{odd, odd}, {"", ""}});
  const auto loaded = xlite::load(dir / "odd.safetensors");
  CHECK(loaded.at(odd).get<float>() == w);
  CHECK(xlite::load_metadata(dir / "odd.safetensors") == xlite::tensor_metadata{{odd, odd}, {"", ""}});
}

TEST_CASE("safetensors: the typed accessor names both dtypes when asked for the wrong one", "[io][safetensors]") {
  const any_tensor t(tensor<xlite::bfloat16>{xlite::bfloat16(1.0f)});
  CHECK(t.type() == dtype::bf16);
  CHECK_THROWS_MATCHES(t.get<float>(), xlite::dtype_error,
                       Catch::Matchers::Message("any_tensor::get: asked for float32, but the tensor is bfloat16"));
}

TEST_CASE("safetensors: lazy tensors are computed in one launch and streamed from their devices", "[io][lazy]") {
  scratch_directory dir;
  const tensor<float> host{{1, -2, 3}, {0.5f, 4, -6}};
  const auto x = xlite::lazy::tensor::from(host);
  const auto shared = xlite::lazy::exp(x) * 2.0f;
  const auto y = shared + 1.0f;
  const auto z = xlite::lazy::sum(shared, {1});
  const tensor<std::int32_t> labels{7, 8};

  const auto compiles = [] {
    return xlite::metrics::counter_value("CachedCompile") + xlite::metrics::counter_value("UncachedCompile");
  };
  const auto compiles_before = compiles();
  const auto transfers_before = xlite::metrics::counter_value("TransferFromDevice");
  xlite::save(dir / "lazy.safetensors", {{"y", y}, {"z", z}, {"x", x}, {"labels", labels}});
  CHECK(compiles() - compiles_before == 1); // y and z in one graph
  CHECK(xlite::metrics::counter_value("TransferFromDevice") - transfers_before == 3);
  CHECK_FALSE(y.has_pending_trace());

  const auto loaded = xlite::load(dir / "lazy.safetensors");
  CHECK(loaded.at("x").get<float>() == host);
  CHECK(loaded.at("y").get<float>() == y.to_host<float>());
  CHECK(loaded.at("z").get<float>() == z.to_host<float>());
  CHECK(loaded.at("labels").get<std::int32_t>() == labels);
  for (std::int64_t i = 0; i < 2; ++i) {
    double row = 0;
    for (std::int64_t j = 0; j < 3; ++j) {
      const float expected = std::exp(host(i, j)) * 2.0f + 1.0f;
      CHECK(loaded.at("y").get<float>()(i, j) == Approx(expected).epsilon(1e-6));
      row += 2.0 * std::exp(static_cast<double>(host(i, j)));
    }
    CHECK(loaded.at("z").get<float>()(i) == Approx(row).epsilon(1e-6));
  }
}

TEST_CASE("safetensors: a save replaces the file there, and a failed one leaves it as it was", "[io][safetensors]") {
  scratch_directory dir;
  const auto path = dir / "w.safetensors";
  xlite::save(path, {{"w", tensor<float>{1, 2}}});
  xlite::save(path, {{"w", tensor<float>{3, 4, 5}}});
  CHECK(xlite::load(path).at("w").get<float>() == tensor<float>{3, 4, 5});
  const std::string before = read_bytes(path);

  const tensor<float> v{1};
  CHECK_THROWS_MATCHES(xlite::save(path, {{"v", v}, {"v", v}}), xlite::value_error,
                       Catch::Matchers::Message("save('" + path.string() + "'): the name 'v' is given twice"));
  CHECK_THROWS_MATCHES(xlite::save(path, {{"__metadata__", v}}), xlite::value_error,
                       Catch::Matchers::Message("save('" + path.string() +
                                                "'): '__metadata__' is the format's own key, not a tensor name"));
  const auto nowhere = dir / "no such directory" / "w.safetensors";
  CHECK_THROWS_WITH(xlite::save(nowhere, {{"v", v}}),
                    Catch::Matchers::StartsWith("save('" + nowhere.string() + "'): cannot create a temporary file"));
  CHECK(read_bytes(path) == before);
  CHECK(dir.files() == std::vector<std::string>{"w.safetensors"});
}

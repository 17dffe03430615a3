// consolidate_checkpoint: stitches a sharded checkpoint, saved by xlite::save_sharded from
// any number of devices, into one safetensors file that PyTorch, JAX or xlite::load reads
// (torch_xla's consolidate_sharded_ckpts, for xlite's checkpoints). One tensor is put
// together in memory at a time.
//
//   consolidate_checkpoint CHECKPOINT_DIR OUTPUT.safetensors

#include <cstdio>
#include <exception>
#include <filesystem>

#include <xlite/io.hpp>

int main(int argc, char** argv) try {
  if (argc != 3) {
    std::fprintf(stderr, "usage: consolidate_checkpoint CHECKPOINT_DIR OUTPUT.safetensors\n");
    return 2;
  }
  const std::filesystem::path checkpoint = argv[1], output = argv[2];
  xlite::consolidate(checkpoint, output);
  const std::vector<xlite::tensor_info> tensors = xlite::describe(output); // its header, checked
  std::int64_t elements = 0;
  for (const auto& t : tensors) {
    std::printf("%-24s %-9s %s\n", t.name.c_str(), std::string(xlite::name(t.type)).c_str(),
                xlite::detail::message(t.shape).c_str());
    elements += t.shape.numel();
  }
  std::printf("%zu tensors, %lld elements, %ju bytes in %s\n", tensors.size(), static_cast<long long>(elements),
              static_cast<std::uintmax_t>(std::filesystem::file_size(output)), output.c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "consolidate_checkpoint: %s\n", e.what());
  return 1;
}

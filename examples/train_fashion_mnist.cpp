// Fashion-MNIST, trained the PyTorch/XLA way: each step is traced (forward, gradients,
// optimizer update), cut by the loader's mark_step(), compiled once and run on the device
// while the next step is traced. Optionally in mixed precision: bf16 matmuls with fp32
// sums (--bf16). With --devices N, data parallel over N devices in SPMD mode: each batch is
// split over a 'data' mesh axis, and the partitioner sums the gradients across devices.
// Built with MPI (as train_fashion_mnist_mpi), the same across processes: under
// `mpirun -np P train_fashion_mnist_mpi --devices N` the mesh spans the P x N devices of
// all processes, each process runs its own devices' shards, and process 0 prints.
// With --device tpu, on a modelled TPU core (docs/tpu.md): a 128x128 weight-stationary
// systolic array with TPU v1's memory, whose numerics the matmuls take (bf16 products, fp32
// sums) and which prices every step; the program prints the step's cycles, MXU utilization
// and MFU.
//
//   train_fashion_mnist [--model mlp|cnn] [--epochs N] [--batch-size N] [--lr X] [--bf16]
//                       [--device cpu|tpu] [--devices N] [--seed N] [--steps N] [--data DIR]
//                       [--expect-accuracy X] [--save DIR] [--load DIR] [--evaluate] [--tpu-cost]
//
// --save writes the trained parameters as a sharded checkpoint (each device its part);
// --load starts from such a checkpoint, saved on any number of devices; --evaluate only
// evaluates (with --load: the saved model's accuracy). --tpu-cost prints what the training
// step's graph would cost on that TPU core, without running it there.
// --steps stops after N training steps (a short run); --expect-accuracy makes the program
// fail unless the test accuracy reaches X, the loss halves and each distinct graph compiled
// once: the tests run it that way. The data comes from Debian's dataset-fashion-mnist
// (scripts/install-deps.sh installs it).

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <iostream>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <xlite/amp.hpp>
#include <xlite/autodiff.hpp>
#include <xlite/data.hpp>
#include <xlite/expr.hpp>
#include <xlite/io.hpp>
#include <xlite/lazy.hpp>
#include <xlite/lazy/tpu_cost.hpp>
#include <xlite/optim.hpp>
#include <xlite/tpu.hpp>
#if defined(XLITE_HAS_MPI)
#include <xlite/runtime/mpi.hpp>
#endif

#include "fashion_mnist_models.hpp"

namespace lazy = xlite::lazy;
using xlite::shape;

namespace {

struct options {
  std::string model = "mlp";
  std::int64_t epochs = 0; // 0: the model's default
  std::int64_t batch_size = 128;
  double lr = 0; // 0: the model's default
  bool bf16 = false;
  std::string device = "cpu";
  std::int64_t devices = 0; // 0: XLITE_NUM_DEVICES, or 1
  std::uint64_t seed = 1;
  std::int64_t steps = 0; // 0: no limit
  std::string data{xlite::data::fashion_mnist_directory};
  std::optional<double> expect_accuracy;
  std::string save; // a checkpoint directory, or empty
  std::string load;
  bool evaluate = false;
  bool tpu_cost = false;
};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "train_fashion_mnist: " << problem << "\n"
            << "usage: train_fashion_mnist [--model mlp|cnn] [--epochs N] [--batch-size N] [--lr X] [--bf16]\n"
            << "                           [--device cpu|tpu] [--devices N] [--seed N] [--steps N] [--data DIR]\n"
            << "                           [--expect-accuracy X] [--save DIR] [--load DIR] [--evaluate] [--tpu-cost]\n";
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(std::string(arg) + " needs a value");
      return argv[++i];
    };
    const auto number = [&](double low) {
      const std::string text = value();
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || !(v >= low)) usage(std::string(arg) + ": bad value '" + text + "'");
      return v;
    };
    if (arg == "--model") {
      o.model = value();
      if (o.model != "mlp" && o.model != "cnn") usage("--model is mlp or cnn, not '" + o.model + "'");
    } else if (arg == "--epochs") {
      o.epochs = static_cast<std::int64_t>(number(1));
    } else if (arg == "--batch-size") {
      o.batch_size = static_cast<std::int64_t>(number(1));
    } else if (arg == "--lr") {
      o.lr = number(1e-12);
    } else if (arg == "--bf16") {
      o.bf16 = true;
    } else if (arg == "--seed") {
      o.seed = static_cast<std::uint64_t>(number(0));
    } else if (arg == "--steps") {
      o.steps = static_cast<std::int64_t>(number(1));
    } else if (arg == "--data") {
      o.data = value();
    } else if (arg == "--expect-accuracy") {
      o.expect_accuracy = number(0);
    } else if (arg == "--save") {
      o.save = value();
    } else if (arg == "--load") {
      o.load = value();
    } else if (arg == "--evaluate") {
      o.evaluate = true;
    } else if (arg == "--tpu-cost") {
      o.tpu_cost = true;
    } else if (arg == "--device") {
      o.device = value();
      if (o.device != "cpu" && o.device != "tpu") usage("--device is cpu or tpu, not '" + o.device + "'");
    } else if (arg == "--devices") {
      o.devices = static_cast<std::int64_t>(number(1));
    } else {
      usage("unknown option '" + std::string(arg) + "'");
    }
  }
  if (o.epochs == 0) o.epochs = o.model == "mlp" ? 10 : 5;
  if (o.lr == 0) o.lr = o.model == "mlp" ? 1e-3 : 2e-3;
  return o;
}

// ---- the modelled TPU core ---------------------------------------------------------------------

// A 128x128 weight-stationary array with TPU v1's on-chip memory, off-chip bandwidth and
// clock, and the default vector unit.
using tpu_array = xlite::tpu::systolic_array<128, 128, xlite::tpu::dataflow::weight_stationary>;
const xlite::tpu::memory_config tpu_memory = xlite::tpu::memory_config::tpu_v1();

// The traced training step (all the next mark_step() would run: the update of the
// parameters and the optimizer's state, the loss, the count of right answers) priced on
// the core, without running it there.
void print_tpu_cost() {
  std::cout << "on a 128x128 systolic array: " << xlite::lazy::tpu_step_cost(tpu_array(tpu_memory)) << '\n';
}

// ---- checkpoints -------------------------------------------------------------------------------

std::string parameter_name(std::size_t i) { return "params." + std::to_string(i); }

// The parameters saved by --save, onto this run's device(s), whichever number saved them.
void load_parameters(std::vector<lazy::tensor>& params, const std::string& dir, const xlite::device& device) {
  const xlite::tensor_map saved = xlite::load_sharded(dir);
  if (saved.size() != params.size()) {
    throw xlite::value_error("--load " + dir + ": the checkpoint has " + std::to_string(saved.size()) +
                             " tensors, the model " + std::to_string(params.size()) + " parameters");
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto found = saved.find(parameter_name(i));
    if (found == saved.end())
      throw xlite::value_error("--load " + dir + ": no " + parameter_name(i) + " in the checkpoint");
    const xlite::tensor<float>& value = found->second.get<float>();
    if (value.shape() != params[i].shape()) {
      throw xlite::value_error(xlite::detail::message("--load ", dir, ": ", parameter_name(i), " has shape ",
                                                      value.shape(), ", the model's is ", params[i].shape()));
    }
    params[i] = lazy::tensor::from(value, device);
  }
}

// ---- reporting --------------------------------------------------------------------------------

// Loss and correct answers per step, kept on the device and read only when printed: a read
// waits for its step, so the step just marked is left to run while the next is traced.
struct running_totals {
  std::vector<lazy::tensor> losses, correct;
  double loss_sum = 0, correct_sum = 0, steps = 0;
  std::optional<double> first_loss;

  void collect(std::size_t leave_running = 0) {
    const std::size_t ready = losses.size() > leave_running ? losses.size() - leave_running : 0;
    for (std::size_t s = 0; s < ready; ++s) {
      const double loss = losses[s].item<double>();
      if (!first_loss) first_loss = loss;
      loss_sum += loss;
      correct_sum += correct[s].item<double>();
    }
    losses.erase(losses.begin(), losses.begin() + static_cast<std::ptrdiff_t>(ready));
    correct.erase(correct.begin(), correct.begin() + static_cast<std::ptrdiff_t>(ready));
    steps += static_cast<double>(ready);
  }
};

void progress(std::int64_t epoch, std::int64_t epochs, std::int64_t done, std::int64_t total, const running_totals& r,
              double batch_size, double seconds, bool final) {
  static const bool terminal = isatty(STDOUT_FILENO) != 0;
  if (!terminal && !final) return;
  constexpr int width = 30;
  const int filled = static_cast<int>(width * done / std::max<std::int64_t>(total, 1));
  std::printf("%sepoch %lld/%lld [%s%s] %lld/%lld  loss %.4f  accuracy %.4f  %.0f images/s%s", terminal ? "\r" : "",
              static_cast<long long>(epoch + 1), static_cast<long long>(epochs), std::string(filled, '#').c_str(),
              std::string(width - filled, '.').c_str(), static_cast<long long>(done), static_cast<long long>(total),
              r.loss_sum / std::max(r.steps, 1.0), r.correct_sum / std::max(r.steps * batch_size, 1.0),
              r.steps * batch_size / std::max(seconds, 1e-9), final ? "\n" : "");
  std::fflush(stdout);
}

lazy::tensor correct_count(const lazy::tensor& logits, const lazy::tensor& labels) {
  return lazy::sum(lazy::cast<std::int64_t>(lazy::argmax(logits, 1) == labels));
}

// Trains and evaluates as `opt` says; returns 1 when --expect-accuracy's expectations fail.
int train(const options& opt) {
  if (xlite::runtime::process_index() != 0 && !std::freopen("/dev/null", "w", stdout)) { // process 0 speaks
    throw xlite::io_error("cannot send this process's output to /dev/null");
  }
  if (opt.bf16) xlite::amp::set_policy({xlite::amp::mode::autocast}); // bf16 products, fp32 sums
  // Data parallel: the batch's rows over a 'data' axis of all devices (of all processes);
  // the parameters and the optimizer's state are replicated.
  const std::int64_t devices = xlite::runtime::global_runtime_device_count();
  std::optional<xlite::spmd::mesh> mesh;
  const auto shard_batch = [&](const auto& batch) {
    if (!mesh) return;
    xlite::spmd::mark_sharding(batch.features, *mesh, {"data"});
    xlite::spmd::mark_sharding(batch.labels, *mesh, {"data"});
  };
  if (devices > 1) {
    if (opt.device == "tpu") throw xlite::config_error("--device tpu runs on one device, in one process");
    xlite::runtime::use_spmd();
    std::vector<std::int64_t> ids(static_cast<std::size_t>(devices));
    std::iota(ids.begin(), ids.end(), 0);
    mesh = xlite::spmd::mesh(ids, {devices}, {"data"});
  }
  if (opt.device == "tpu") xlite::tpu::configure<tpu_array>(tpu_memory);
  const xlite::device device(opt.device); // with --devices N: SPMD's virtual device, cpu:0

  // The data, standardised once on the host with a fused expression (Fashion-MNIST's mean
  // and standard deviation).
  auto train = xlite::data::load_fashion_mnist(xlite::data::split::train, opt.data);
  auto test = xlite::data::load_fashion_mnist(xlite::data::split::test, opt.data);
  for (auto* images : {&train.images, &test.images}) *images = (*images - 0.2860f) / 0.3530f;

  lazy::set_rng_state(opt.seed, device);
  fashion_mnist::model m = opt.model == "mlp" ? fashion_mnist::mlp(device) : fashion_mnist::cnn(device);
  if (!opt.load.empty()) load_parameters(m.params, opt.load, device);
  const std::int64_t steps_per_epoch = 60000 / opt.batch_size;
  const std::int64_t total_steps = opt.evaluate ? 0
                                   : opt.steps  ? std::min(opt.steps, opt.epochs * steps_per_epoch)
                                                : opt.epochs * steps_per_epoch;
  xlite::optim::adam optimizer(m.params, {.lr = opt.lr});
  const xlite::optim::cosine schedule(opt.lr, std::max<std::int64_t>(total_steps, 1),
                                      opt.lr / 100); // 0 steps: --evaluate
  xlite::mark_step();                                // the initial parameters and the optimizer's state, on the device

  xlite::data::loader train_loader(std::move(train.images), std::move(train.labels),
                                   {.batch_size = opt.batch_size,
                                    .shuffle = true,
                                    .seed = opt.seed,
                                    .drop_last = true,
                                    .prefetch = 4,
                                    .device = device});
  xlite::data::loader test_loader(std::move(test.images), std::move(test.labels),
                                  {.batch_size = 1000, .device = device});

  std::printf("Fashion-MNIST, %s, batch %lld, Adam %.0e with a cosine schedule, %s", opt.model.c_str(),
              static_cast<long long>(opt.batch_size), opt.lr, opt.bf16 ? "bf16 matmuls (fp32 sums)" : "fp32");
  if (mesh) std::printf(", data parallel over %lld devices", static_cast<long long>(devices));
  if (xlite::runtime::process_count() > 1) {
    std::printf(" of %lld processes", static_cast<long long>(xlite::runtime::process_count()));
  }
  if (opt.device == "tpu") std::printf(", on tpu:0 (a 128x128 systolic array, bf16 products, fp32 sums)");
  std::printf("\n");
  const auto started = std::chrono::steady_clock::now();
  std::int64_t step = 0;
  std::optional<double> first_loss;
  double last_epoch_loss = 0, train_seconds = 0;
  const auto batch_size = static_cast<double>(opt.batch_size);
  for (std::int64_t epoch = 0; epoch < opt.epochs && step < total_steps; ++epoch) {
    running_totals totals;
    const auto epoch_started = std::chrono::steady_clock::now();
    const auto seconds = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_started).count();
    };
    for (const auto& batch : train_loader) { // each fetch marks the step traced on the last batch
      if (step >= total_steps) break;
      if (batch.index % 20 == 0) {
        totals.collect(1);
        progress(epoch, opt.epochs, batch.index, steps_per_epoch, totals, batch_size, seconds(), false);
      }
      optimizer.set_lr(schedule(step)); // a graph parameter: a new rate does not recompile
      shard_batch(batch);
      const lazy::tensor logits = m.forward(m.params, batch.features);
      const lazy::tensor loss = lazy::cross_entropy(logits, batch.labels);
      optimizer.step(m.params, xlite::grad(loss, m.params));
      totals.losses.push_back(loss);
      totals.correct.push_back(correct_count(logits, batch.labels));
      if (opt.tpu_cost && step == 0) print_tpu_cost();
      ++step;
    }
    xlite::mark_step();
    totals.collect();
    train_seconds += seconds();
    if (!first_loss) first_loss = totals.first_loss;
    last_epoch_loss = totals.loss_sum / std::max(totals.steps, 1.0);
    progress(epoch, opt.epochs, static_cast<std::int64_t>(totals.steps), steps_per_epoch, totals, batch_size, seconds(),
             true);
    if (opt.device == "tpu")
      std::cout << "  each training step on tpu:0, " << xlite::tpu::last_step_report(device) << '\n';
  }

  // Evaluation: forward only, the correct answers counted on the device.
  std::vector<lazy::tensor> correct;
  for (const auto& batch : test_loader) {
    shard_batch(batch);
    correct.push_back(correct_count(m.forward(m.params, batch.features), batch.labels));
  }
  if (!opt.save.empty()) {
    std::vector<std::pair<std::string, lazy::tensor>> named;
    for (std::size_t i = 0; i < m.params.size(); ++i) named.emplace_back(parameter_name(i), m.params[i]);
    xlite::save_sharded(opt.save, named, {{"model", opt.model}, {"steps", std::to_string(step)}});
  }
  xlite::mark_step();
  double right = 0;
  for (const auto& c : correct) right += c.item<double>();
  const double accuracy = right / 10000;
  const double total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  const auto compilations = xlite::metrics::counter_value("UncachedCompile");
  std::printf("test accuracy %.4f after %lld steps (%.1f s)\n", accuracy, static_cast<long long>(step), total_seconds);
  if (step > 0) {
    std::printf("%.2f ms per training step, %.0f images/s\n", 1e3 * train_seconds / static_cast<double>(step),
                static_cast<double>(step * opt.batch_size) / train_seconds);
  }
  std::printf("compilations: %lld (one per distinct graph: initialisation, training step, evaluation step)\n\n",
              static_cast<long long>(compilations));
  std::cout << xlite::metrics::short_report();

  if (opt.expect_accuracy) {
    bool ok = true;
    const auto expect = [&](bool condition, const std::string& what) {
      if (!condition) std::fprintf(stderr, "train_fashion_mnist: expected %s\n", what.c_str());
      ok = ok && condition;
    };
    expect(accuracy >= *opt.expect_accuracy, "a test accuracy of at least " + std::to_string(*opt.expect_accuracy));
    if (!opt.evaluate) {
      expect(first_loss && last_epoch_loss < 0.5 * *first_loss,
             "the loss to halve from the first step to the last epoch's mean");
    }
    const int graphs = opt.evaluate ? 2 : 3;
    expect(compilations == graphs, std::to_string(graphs) + " compilations, one per distinct graph");
    return ok ? 0 : 1;
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) try {
  const options opt = parse(argc, argv);
  if (opt.devices > 0) xlite::runtime::set_num_devices(opt.devices); // before the processes compare device counts
#if defined(XLITE_HAS_MPI)
  return xlite::mpi::run(argc, argv, [&] {
    if (train(opt) != 0) throw xlite::error("train_fashion_mnist: the expectations were not met");
  });
#else
  return train(opt);
#endif
} catch (const std::exception& e) {
  std::fprintf(stderr, "train_fashion_mnist: %s\n", e.what());
  return 1;
}

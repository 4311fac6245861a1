// A group of ranks inside one process, one std::thread per rank, for tests of data parallelism
// without mpirun: the collectives of train/data_parallel.h over shared memory, with the same
// reduction order as the MPI ones (each shard's owner adds the ranks' copies in rank order), so
// N thread ranks must give the bits N MPI ranks give. Test-only: every collective is a barrier
// plus plain copies, and a rank that throws leaves the others waiting (the test then hangs until
// ctest's timeout, which names it).
#pragma once
#include <barrier>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "train/data_parallel.h"

namespace dg::test {

class ThreadRanks {
 public:
  explicit ThreadRanks(int size)
      : size_(size), sync_(size), floats_(size), doubles_(size), texts_(size) {}

  class Rank final : public Collectives {
   public:
    Rank(ThreadRanks& group, int rank) : g_(group), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return g_.size_; }
    void reduce_scatter_in_rank_order(float* buffer, const std::vector<int64_t>& bounds) override {
      g_.floats_[rank_] = buffer;
      barrier();
      // Only this rank touches its shard's positions, in every rank's buffer.
      for (int64_t i = bounds[rank_]; i < bounds[rank_ + 1]; ++i) {
        float sum = g_.floats_[0][i];
        for (int q = 1; q < g_.size_; ++q) sum += g_.floats_[q][i];
        buffer[i] = sum;
      }
      barrier();
    }
    void all_gather(float* buffer, const std::vector<int64_t>& bounds) override {
      g_.floats_[rank_] = buffer;
      barrier();
      for (int q = 0; q < g_.size_; ++q)
        if (q != rank_)
          std::memcpy(buffer + bounds[q], g_.floats_[q] + bounds[q],
                      static_cast<size_t>(bounds[q + 1] - bounds[q]) * sizeof(float));
      barrier();
    }
    void gather_to_root(const float* mine, float* full,
                        const std::vector<int64_t>& bounds) override {
      g_.floats_[rank_] = const_cast<float*>(mine);
      barrier();
      if (rank_ == 0)
        for (int q = 0; q < g_.size_; ++q)
          std::memcpy(full + bounds[q], g_.floats_[q],
                      static_cast<size_t>(bounds[q + 1] - bounds[q]) * sizeof(float));
      barrier();
    }
    std::vector<double> all_gather(const std::vector<double>& mine) override {
      g_.doubles_[rank_] = mine;
      barrier();
      std::vector<double> all;
      for (const auto& part : g_.doubles_) all.insert(all.end(), part.begin(), part.end());
      barrier();
      return all;
    }
    std::vector<std::string> all_gather(const std::string& mine) override {
      g_.texts_[rank_] = mine;
      barrier();
      std::vector<std::string> all = g_.texts_;
      barrier();
      return all;
    }
    void barrier() override { g_.sync_.arrive_and_wait(); }
    void all_reduce_sum_any_order(float*, int64_t) override {}

   private:
    ThreadRanks& g_;
    int rank_;
  };

  // Runs body(rank) on `size` threads at once and waits for them all.
  void run(const std::function<void(Rank&)>& body) {
    std::vector<Rank> ranks;
    for (int r = 0; r < size_; ++r) ranks.emplace_back(*this, r);
    std::vector<std::thread> threads;
    for (int r = 0; r < size_; ++r) threads.emplace_back([&, r] { body(ranks[r]); });
    for (std::thread& t : threads) t.join();
  }

 private:
  int size_;
  std::barrier<> sync_;
  std::vector<float*> floats_;
  std::vector<std::vector<double>> doubles_;
  std::vector<std::string> texts_;
};

}  // namespace dg::test

// A group of ranks inside one process, one std::thread per rank, for tests of data parallelism
// without mpirun: the collectives of train/data_parallel.h over shared memory, with the same
// reduction order as the MPI ones (each shard's owner adds the ranks' copies in rank order), so
// N thread ranks must give the bits N MPI ranks give. Test-only: every collective is a barrier
// plus plain copies; point-to-point messages go through a mailbox (a message is copied when its
// send and its receive have both been posted), so the reduction that overlaps backward runs here
// too. A rank that throws leaves the others waiting (the test then hangs until
// ctest's timeout, which names it).
#pragma once
#include <barrier>
#include <cstring>
#include <functional>
#include <mutex>
#include <stdexcept>
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
    bool point_to_point() const override { return true; }
    int64_t start_send(const float* data, int64_t count, int to, int tag) override {
      return g_.post(Message{rank_, to, tag, const_cast<float*>(data), count, true});
    }
    int64_t start_receive(float* data, int64_t count, int from, int tag) override {
      return g_.post(Message{from, rank_, tag, data, count, false});
    }
    bool done(int64_t handle) override {
      std::lock_guard<std::mutex> lock(g_.mail_mutex_);
      return g_.mail_.at(static_cast<size_t>(handle)).complete;
    }

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
  struct Message {
    int from, to, tag;
    float* data;
    int64_t count;
    bool send;
    bool complete = false;
  };
  // Posts a send or a receive and pairs it with the oldest open one of the other kind between
  // the same ranks under the same tag (copying the floats); returns its handle.
  int64_t post(const Message& m) {
    std::lock_guard<std::mutex> lock(mail_mutex_);
    mail_.push_back(m);
    Message& mine = mail_.back();
    for (size_t j = 0; j + 1 < mail_.size(); ++j) {
      Message& other = mail_[j];
      if (other.complete || other.send == mine.send || other.from != mine.from ||
          other.to != mine.to || other.tag != mine.tag)
        continue;
      const Message& sent = mine.send ? mine : other;
      Message& received = mine.send ? other : mine;
      if (sent.count != received.count)
        throw std::logic_error("thread ranks: a message and its receive differ in size");
      std::memcpy(received.data, sent.data, static_cast<size_t>(sent.count) * sizeof(float));
      other.complete = mine.complete = true;
      break;
    }
    return static_cast<int64_t>(mail_.size()) - 1;
  }
  int size_;
  std::barrier<> sync_;
  std::mutex mail_mutex_;
  std::vector<Message> mail_;  // every message posted, by handle
  std::vector<float*> floats_;
  std::vector<std::vector<double>> doubles_;
  std::vector<std::string> texts_;
};

}  // namespace dg::test

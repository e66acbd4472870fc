// A simulated worker for the coordinator benchmark: one ZeroMQ DEALER connection on its
// own thread, speaking HLW1 (schema/protocol.md) with the real token, and running every
// assignment as the no-op run kind without spawning anything.
//
// Thread model: Start() launches the thread that owns the socket, or hands the worker to
// a SimDriver whose threads serve many workers each (a fleet of 1,000); every other public
// method may be called from any thread (atomics or mutex_).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "common/json.h"

namespace headlab::bench {

using Clock = std::chrono::steady_clock;

class SimDriver;

class SimWorker {
 public:
  enum class Mode {
    kNoop,               // ASSIGN -> ACCEPT, METRICS (config.noop.metrics points), DONE
    kIngest,             // ASSIGN -> ACCEPT, `batches` METRICS of `batch_points`, then DONE
    kSilentAfterAccept,  // ASSIGN -> ACCEPT, one HEARTBEAT, then silence (a dead worker)
    kHold,               // ASSIGN -> ACCEPT, then keep it running (named in HEARTBEATs)
    kResults,            // ASSIGN -> ACCEPT, a logprobs ARTIFACT (a file written under
                         // work_dir), DONE with eval.ppl and eval.loss summaries
  };
  struct Options {
    std::string endpoint;  // tcp://127.0.0.1:PORT
    std::string token;
    std::string identity;  // READY.id, "worker-<host>-<pid>" style, unique
    std::string name;
    Mode mode = Mode::kNoop;
    int batches = 16;         // kIngest: METRICS messages per run
    int batch_points = 1000;  // kIngest: points per METRICS message
    int window = 4;           // kIngest: METRICS messages in flight before waiting for ACKs
    std::string work_dir;     // READY.work_dir; kResults writes its files under it ("": none)
    int logprob_rows = 16;    // kResults: rows of model.context log-probabilities per run
  };
  // One ASSIGN received.
  struct Assignment {
    int64_t run = 0;
    int attempt = 0;
    Clock::time_point at;
  };

  SimWorker(zmq::context_t* ctx, Options options);
  // Stops the thread (as Stop) if running.
  ~SimWorker();
  SimWorker(const SimWorker&) = delete;
  SimWorker& operator=(const SimWorker&) = delete;

  // Connects and sends READY on a new thread, or on one of `driver`'s (which must
  // outlive this worker's Stop).
  void Start(SimDriver* driver = nullptr);
  // Sends DISCONNECT (unless silent) and joins the thread (or waits for the driver to
  // close the socket).
  void Stop();
  // Changes how later ASSIGNs are answered.
  void set_mode(Mode m) { mode_.store(m); }
  // Zeroes the counters and times below (between benchmark phases, while idle).
  void ResetStats();

  bool welcomed() const { return welcomed_.load(); }
  bool silent() const { return silent_.load(); }
  // Returns the REFUSE reason or a protocol error seen; "" when none.
  std::string error() const;
  // Number of DONE messages the coordinator acknowledged.
  int64_t runs_done() const { return runs_done_.load(); }
  // Number of metric points the coordinator acknowledged (ACK seq + 1 per attempt).
  int64_t points_acked() const { return points_acked_.load(); }
  // Number of CANCELs received (attempts the coordinator took away).
  int64_t cancels() const { return cancels_.load(); }
  // Number of REREGISTERs received (the coordinator forgot this worker).
  int64_t reregisters() const { return reregisters_.load(); }
  // The coordinator's HEARTBEATs received, and the longest time between two of them (it
  // sends one per kHeartbeatInterval: the excess is how late its loop was).
  int64_t coordinator_heartbeats() const { return coordinator_heartbeats_.load(); }
  Clock::duration max_heartbeat_gap() const;
  // Returns and forgets how late each coordinator HEARTBEAT received since the last call
  // came (its gap from the previous one less the interval), in seconds.
  std::vector<double> TakeHeartbeatLateness();
  std::vector<Assignment> assignments() const;
  // Times of the first METRICS sent, the last METRICS ACK, the last DONE ACK and the last
  // HEARTBEAT sent (epoch when none).
  Clock::time_point first_metrics_sent() const;
  Clock::time_point last_metrics_ack() const;
  Clock::time_point last_done_ack() const;
  Clock::time_point last_heartbeat() const;

 private:
  // An ingest-mode attempt in progress.
  struct Job {
    int64_t run = 0;
    int attempt = 0;
    int next_batch = 0;      // batches sent
    int64_t acked_seq = -1;  // highest seq the coordinator acknowledged
    bool done_sent = false;
    bool hold = false;  // kHold: running until cancelled, no points
  };

  friend class SimDriver;
  // The socket's life, on the owning thread: connect and READY; receive and answer what
  // arrived, run the timers; DISCONNECT (unless silent) and close.
  void Open();
  void Service();
  void Close();
  void Loop();
  void Send(const char* command, const std::string& body);
  void SendReady();
  void SendHeartbeat();
  void SendDone(int64_t run, int attempt, const char* status);
  void SendPoints(int64_t run, int attempt, int64_t first_seq, int count);
  // kResults: writes the run's logprobs file, sends its ARTIFACT and the DONE.
  void SendResults(int64_t run, int attempt, const Json& config);
  void OnMessage(const std::string& command, const std::string& body);
  void OnAssign(const std::string& body);
  void OnAck(const std::string& body);
  void PumpIngest();
  void SetError(const std::string& e);

  // Constant after construction.
  zmq::context_t* ctx_;
  const Options opt_;

  // Owned by the thread.
  std::unique_ptr<zmq::socket_t> sock_;
  std::vector<Job> jobs_;
  std::vector<std::pair<int64_t, int>> noop_running_;  // noop attempts awaiting DONE ACK
  Clock::time_point next_heartbeat_;
  std::string session_;  // WELCOME.session: the auth frame of every message after READY

  std::thread thread_;
  bool driven_ = false;  // started on a SimDriver (caller's thread only)
  std::atomic<bool> stop_{false};
  std::atomic<bool> closed_{false};
  std::atomic<Mode> mode_;
  std::atomic<bool> welcomed_{false};
  std::atomic<bool> silent_{false};
  std::atomic<int64_t> runs_done_{0};
  std::atomic<int64_t> points_acked_{0};
  std::atomic<int64_t> cancels_{0};
  std::atomic<int64_t> reregisters_{0};
  std::atomic<int64_t> coordinator_heartbeats_{0};

  mutable std::mutex mu_;
  // Guarded by mu_.
  std::string error_;
  std::vector<Assignment> assignments_;
  Clock::time_point first_metrics_sent_{};
  Clock::time_point last_metrics_ack_{};
  Clock::time_point last_done_ack_{};
  Clock::time_point last_heartbeat_{};
  Clock::time_point last_coordinator_heartbeat_{};
  Clock::duration max_heartbeat_gap_{};
  std::vector<double> heartbeat_lateness_;
};

// Serves SimWorkers on `threads` threads, each polling its share of their sockets: 1,000
// simulated workers cost a few threads instead of 1,000 (the coordinator being measured
// shares the machine).
class SimDriver {
 public:
  explicit SimDriver(int threads);
  // Closes the workers still running (DISCONNECT) and joins the threads.
  ~SimDriver();
  SimDriver(const SimDriver&) = delete;
  SimDriver& operator=(const SimDriver&) = delete;

 private:
  friend class SimWorker;
  struct Lane {
    std::thread thread;
    std::mutex mu;
    std::vector<SimWorker*> incoming;  // guarded by mu
  };
  void Add(SimWorker* sim);
  void Run(Lane* lane);

  std::vector<std::unique_ptr<Lane>> lanes_;
  size_t next_ = 0;  // caller's thread
  std::atomic<bool> stop_{false};
};

}  // namespace headlab::bench

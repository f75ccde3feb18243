// `strata serve` as a child process for the server tests: started on a free loopback port (--port
// 0; the port is read from its "listening on" line), its stderr collected by a thread, stopped
// with a signal and reaped with its exit status.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <functional>
#include <mutex>
#include <regex>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <httplib.h>

extern char** environ;

namespace strata::test {

class ServeProcess {
 public:
  // Starts `strata serve --port 0 ARGS` and waits (up to 60 s) until it listens.
  explicit ServeProcess(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {std::string(STRATA_BINARY_DIR) + "/strata", "serve", "--port", "0"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    REQUIRE(posix_spawn(&pid_, cargv[0], &fa, nullptr, cargv.data(), environ) == 0);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    reader_ = std::thread([this, fd = fds[0]] {
      char buf[4096];
      for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) {
        std::lock_guard lock(mu_);
        err_.append(buf, size_t(n));
        cv_.notify_all();
      }
      close(fd);
      std::lock_guard lock(mu_);
      eof_ = true;
      cv_.notify_all();
    });
    std::unique_lock lock(mu_);
    const std::regex listening("listening on http://[0-9.]+:([0-9]+)");
    std::smatch m;
    cv_.wait_for(lock, std::chrono::seconds(60), [&] { return eof_ || std::regex_search(err_, m, listening); });
    if (std::regex_search(err_, m, listening)) {
      port_ = std::stoi(m[1]);
      return;
    }
    // Failed to start: reap the process and the reader before failing (a throwing constructor
    // runs no destructor, and a joinable thread would abort the test binary).
    const std::string err = err_;
    lock.unlock();
    stop(SIGKILL);
    FAIL("strata serve did not start: " << err);
  }
  ~ServeProcess() {
    if (pid_ > 0) stop(SIGKILL);
  }

  int port() const { return port_; }
  std::string stderr_text() {
    std::lock_guard lock(mu_);
    return err_;
  }
  void signal(int sig) { kill(pid_, sig); }
  // Resident memory of the server now (VmRSS), in KiB; -1 when unreadable.
  long rss_kib() const {
    FILE* f = std::fopen(("/proc/" + std::to_string(pid_) + "/status").c_str(), "r");
    if (!f) return -1;
    char line[256];
    long kib = -1;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
    std::fclose(f);
    return kib;
  }
  // Sends `sig` and returns the exit status (128 + signal when killed by one).
  int stop(int sig = SIGTERM) {
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    if (reader_.joinable()) reader_.join();
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::thread reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string err_;
  bool eof_ = false;
};

// POSTs `body` to /v1/completions of the server on `port`, handing the response to `receive` as
// it arrives (return false to hang up mid-stream): a streamed request read chunk by chunk.
inline void post_streaming(int port, std::string body, const std::function<bool(const char*, size_t)>& receive) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(300);  // sanitizer builds on a loaded 2-core machine (see the SIGTERM test)
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = {{"Content-Type", "application/json"}};
  req.body = std::move(body);
  req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) { return receive(d, n); };
  c.send(req);
}

}  // namespace strata::test

// A stand-in poller for cost.py: wakes RATE times a second on absolute CLOCK_MONOTONIC deadlines (timer slack
// 1 ns, like gilspy's sleep mode) and does MODE's work on process PID, so that each part of gilspy's cost can be
// measured on its own:
//   -m 0  nothing: the cost of the wake-ups alone
//   -m 1  one process_vm_readv of 208 bytes at ADDR (the GIL struct): what reading the GIL adds
//   -m 2  as 1, plus a pread of /proc/PID/task/TID/syscall for every thread (opened once at start)
//   -m 3  as 1, plus opendir/readdir /proc/PID/task and open+pread+close of each thread's syscall file, every
//         poll: what re-walking a churning thread list and opening the new threads' files costs
// Where it runs:
//   -s normal|fifo   scheduling class: CFS (default) or SCHED_FIFO at the lowest real-time priority (gilspy's
//                    default): a FIFO wake-up preempts whatever CFS task runs on its CPU, at once
//   -c free|N|other  CPU affinity: anywhere (default), pinned to CPU N, or "other": every -i ms, find the
//                    target's thread that ran most since the last look (schedstat) and is runnable, and move
//                    to the CPUs it is not on (away from the GIL holder, on a CPU-bound target)
// Prints "polls N late L scans S moves M" at the end (late: woke more than a fifth of a period late).
// Build: cc -O2 -o poller poller.c
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 1024

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int read_file(const char* path, char* buf, size_t size) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  ssize_t n = pread(fd, buf, size - 1, 0);
  close(fd);
  if (n < 0) return -1;
  buf[n] = 0;
  return (int)n;
}

// "other" placement: the target thread that ran most since the last scan, if runnable, and the CPU it is on.
static struct {
  int tid;
  long long runtime;
} seen[MAX_THREADS];
static int nseen;

static int busiest_cpu(int pid) {
  char path[96], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/task", pid);
  DIR* d = opendir(path);
  if (!d) return -1;
  struct dirent* e;
  long long best = 0;
  int best_cpu = -1;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    int tid = atoi(e->d_name);
    snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", pid, tid);
    if (read_file(path, buf, sizeof buf) < 0) continue;
    long long rt = atoll(buf), delta = rt;
    int k;
    for (k = 0; k < nseen && seen[k].tid != tid; k++) {
    }
    if (k < nseen) {
      delta = rt - seen[k].runtime;
    } else if (nseen < MAX_THREADS) {
      nseen++;
    } else {
      k = -1;
    }
    if (k >= 0) {
      seen[k].tid = tid;
      seen[k].runtime = rt;
    }
    if (delta <= best) continue;
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", pid, tid);
    if (read_file(path, buf, sizeof buf) < 0) continue;
    char* p = strrchr(buf, ')');  // comm may hold spaces: fields are counted after its closing parenthesis
    if (!p || p[2] != 'R') continue;
    // field 39 (processor) is the 37th after the parenthesis (field 3, the state, is the 1st)
    int field = 2;
    for (p += 2; *p && field < 39; p++) {
      if (*p == ' ') field++;
    }
    best = delta;
    best_cpu = atoi(p);
  }
  closedir(d);
  return best_cpu;
}

static void usage(void) {
  fprintf(stderr,
          "usage: poller -p PID [-r RATE] [-m 0|1|2|3] [-a GIL_ADDR] [-d SECONDS] [-s normal|fifo] "
          "[-c free|N|other] [-i SCAN_MS]\n");
  exit(2);
}

int main(int argc, char** argv) {
  int pid = 0, mode = 0, fifo = 0, pin = -1, other = 0;
  double rate = 10000, secs = 5, scan_ms = 10;
  unsigned long addr = 0;
  int opt;
  while ((opt = getopt(argc, argv, "p:r:m:a:d:s:c:i:")) != -1) {
    switch (opt) {
      case 'p': pid = atoi(optarg); break;
      case 'r': rate = atof(optarg); break;
      case 'm': mode = atoi(optarg); break;
      case 'a': addr = strtoul(optarg, 0, 0); break;
      case 'd': secs = atof(optarg); break;
      case 's':
        if (strcmp(optarg, "fifo") == 0) fifo = 1;
        else if (strcmp(optarg, "normal") != 0) usage();
        break;
      case 'c':
        if (strcmp(optarg, "other") == 0) other = 1;
        else if (strcmp(optarg, "free") != 0) pin = atoi(optarg);
        break;
      case 'i': scan_ms = atof(optarg); break;
      default: usage();
    }
  }
  if (pid <= 0 || rate <= 0 || mode < 0 || mode > 3) usage();
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  if (fifo) {
    struct sched_param sp = {.sched_priority = sched_get_priority_min(SCHED_FIFO)};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) perror("poller: SCHED_FIFO");
  }
  int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (pin >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(pin, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) perror("poller: affinity");
  }
  int fds[MAX_THREADS];
  int n = 0;
  char path[96];
  if (mode == 2) {
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR* d = opendir(path);
    struct dirent* e;
    while (d && (e = readdir(d)) && n < MAX_THREADS) {
      if (e->d_name[0] == '.') continue;
      snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", pid, atoi(e->d_name));
      int fd = open(path, O_RDONLY);
      if (fd >= 0) fds[n++] = fd;
    }
    if (d) closedir(d);
  }
  long long period = (long long)(1e9 / rate), t = now_ns(), end = t + (long long)(secs * 1e9);
  long long scan_every = (long long)(scan_ms * 1e6), next_scan = t;
  long polls = 0, late = 0, scans = 0, moves = 0;
  int away_from = -1;
  char buf[208], text[256];
  while (t < end) {
    t += period;
    struct timespec ts = {t / 1000000000LL, t % 1000000000LL};
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, 0);
    long long woke = now_ns();
    if (woke - t > period / 5) late++;
    if (mode >= 1) {
      struct iovec local = {buf, sizeof buf}, remote = {(void*)addr, sizeof buf};
      process_vm_readv(pid, &local, 1, &remote, 1, 0);
    }
    for (int i = 0; i < n; i++) pread(fds[i], text, sizeof text, 0);
    if (mode == 3) {
      snprintf(path, sizeof path, "/proc/%d/task", pid);
      DIR* d = opendir(path);
      struct dirent* e;
      while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char f[128];
        snprintf(f, sizeof f, "/proc/%d/task/%d/syscall", pid, atoi(e->d_name));
        read_file(f, text, sizeof text);
      }
      if (d) closedir(d);
    }
    if (other && woke >= next_scan) {
      next_scan = woke + scan_every;
      scans++;
      int cpu = busiest_cpu(pid);
      if (cpu >= 0 && cpu != away_from && ncpu > 1) {
        cpu_set_t set;
        CPU_ZERO(&set);
        for (int c = 0; c < ncpu; c++) {
          if (c != cpu) CPU_SET(c, &set);
        }
        if (sched_setaffinity(0, sizeof set, &set) == 0) {
          away_from = cpu;
          moves++;
        }
      }
    }
    polls++;
    long long after = now_ns();
    if (after > t + period) t = after;  // ran over: skip the missed deadlines
  }
  printf("polls %ld late %ld scans %ld moves %ld\n", polls, late, scans, moves);
  return 0;
}

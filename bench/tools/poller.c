// A stand-in poller for cost.py --floor: wakes RATE times a second on absolute CLOCK_MONOTONIC deadlines
// (timer slack 1 ns, like gilspy's sleep mode) and does MODE's work on process PID for SECONDS:
//   0  nothing: the cost of the wake-ups alone
//   1  one process_vm_readv of 208 bytes at ADDR (the GIL struct)
//   2  as 1, plus reading /proc/PID/task/TID/syscall of every thread
// It tells how much of gilspy's cost is waking up at all, and how much is the work it does per poll.
// Prints "polls N". Build: cc -O2 -o poller poller.c
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: poller PID RATE MODE ADDR SECONDS\n");
    return 2;
  }
  int pid = atoi(argv[1]);
  double rate = atof(argv[2]);
  int mode = atoi(argv[3]);
  unsigned long addr = strtoul(argv[4], 0, 0);
  double secs = atof(argv[5]);
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  int fds[256];
  int n = 0;
  if (mode >= 2) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR* d = opendir(path);
    struct dirent* e;
    while (d && (e = readdir(d)) && n < 256) {
      if (e->d_name[0] == '.') continue;
      char f[128];
      snprintf(f, sizeof f, "/proc/%d/task/%s/syscall", pid, e->d_name);
      int fd = open(f, O_RDONLY);
      if (fd >= 0) fds[n++] = fd;
    }
    if (d) closedir(d);
  }
  long long period = (long long)(1e9 / rate), t = now_ns(), end = t + (long long)(secs * 1e9);
  long polls = 0;
  char buf[208], text[256];
  while (t < end) {
    t += period;
    struct timespec ts = {t / 1000000000LL, t % 1000000000LL};
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, 0);
    if (mode >= 1) {
      struct iovec local = {buf, sizeof buf}, remote = {(void*)addr, sizeof buf};
      process_vm_readv(pid, &local, 1, &remote, 1, 0);
    }
    for (int i = 0; i < n; i++) pread(fds[i], text, sizeof text, 0);
    polls++;
    long long after = now_ns();
    if (after > t + period) t = after;  // ran over: skip the missed deadlines
  }
  printf("polls %ld\n", polls);
  return 0;
}

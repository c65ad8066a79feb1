// host_memory: what is left to allocate (parsed from meminfo, the memory cgroup and the process's
// status), the one-line error, and the text shown for a std::bad_alloc or a thread that could not
// start.
#include "inference/host_memory.h"

#include <gtest/gtest.h>

#include <limits>
#include <new>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace kvs {
namespace {

using namespace host_memory_detail;
constexpr uint64_t kUnknown = std::numeric_limits<uint64_t>::max();

TEST(HostMemory, MeminfoRoomIsAvailablePlusFreeSwap) {
  const std::string meminfo =
      "MemTotal:       24683656 kB\nMemFree:  100 kB\nMemAvailable:    1000 kB\nSwapTotal: 50 kB\nSwapFree:    24 kB\n";
  EXPECT_EQ(meminfo_room(meminfo), 1024u * 1024u);
  EXPECT_EQ(meminfo_room("MemAvailable: 2 kB\n"), 2048u) << "no swap line";
  EXPECT_EQ(meminfo_room("MemTotal: 2 kB\n"), kUnknown) << "a kernel without MemAvailable";
  EXPECT_EQ(meminfo_room(""), kUnknown);
}

TEST(HostMemory, CgroupRoomIsTheLimitLessTheUsage) {
  EXPECT_EQ(cgroup_room("1000\n", "400\n"), 600u);
  EXPECT_EQ(cgroup_room("400\n", "1000\n"), 0u) << "over the limit already";
  EXPECT_EQ(cgroup_room("max\n", "400\n"), kUnknown) << "v2: no limit";
  EXPECT_EQ(cgroup_room("9223372036854771712\n", "400\n"), kUnknown) << "v1: no limit";
  EXPECT_EQ(cgroup_room("", ""), kUnknown) << "no such cgroup file";
}

TEST(HostMemory, TheCgroupsThatLimitAProcessAreItsOwnAndEachAboveIt) {
  using Dirs = std::vector<std::string>;
  // cgroup v2: a systemd scope, and a container that sees its own cgroup as the root.
  EXPECT_EQ(cgroup_dirs("0::/user.slice/run-r1.scope\n", "", "/sys/fs/cgroup"),
            (Dirs{"/sys/fs/cgroup/user.slice/run-r1.scope", "/sys/fs/cgroup/user.slice", "/sys/fs/cgroup"}));
  EXPECT_EQ(cgroup_dirs("0::/\n", "", "/sys/fs/cgroup"), Dirs{"/sys/fs/cgroup"});
  // cgroup v1: a Slurm job, its memory controller among others; the v2 line of a hybrid system
  // is not the memory hierarchy.
  const std::string v1 = "12:cpu,cpuacct:/slurm\n4:freezer,memory:/slurm/uid_0/job_7\n0::/init.scope\n";
  EXPECT_EQ(cgroup_dirs(v1, "memory", "/sys/fs/cgroup/memory"),
            (Dirs{"/sys/fs/cgroup/memory/slurm/uid_0/job_7", "/sys/fs/cgroup/memory/slurm/uid_0",
                  "/sys/fs/cgroup/memory/slurm", "/sys/fs/cgroup/memory"}));
  EXPECT_EQ(cgroup_dirs(v1, "", "/sys/fs/cgroup"), (Dirs{"/sys/fs/cgroup/init.scope", "/sys/fs/cgroup"}));
  EXPECT_EQ(cgroup_dirs("", "memory", "/m"), Dirs{"/m"}) << "unreadable: the mount alone";
  EXPECT_EQ(cgroup_dirs("4:memory:/a\n", "", "/m"), Dirs{"/m"}) << "no v2 line";
}

TEST(HostMemory, StatusFieldsAreKibibytes) {
  const std::string status = "Name:\tkvscope\nVmPeak:\t  900 kB\nVmSize:\t  800 kB\nVmData:\t  300 kB\n";
  EXPECT_EQ(status_kib(status, "VmSize"), 800u * 1024u);
  EXPECT_EQ(status_kib(status, "VmData"), 300u * 1024u);
  EXPECT_EQ(status_kib(status, "VmSwap"), kUnknown);
  EXPECT_EQ(status_kib("XVmData: 5 kB\n", "VmData"), kUnknown) << "a field's name starts its line";
}

TEST(HostMemory, ThisProcessHasSomeAndNotUnlimitedMemory) {
  const uint64_t available = host_memory_available();
  EXPECT_GT(available, 1u << 20);
  EXPECT_LT(available, kUnknown) << "/proc/meminfo is readable on Linux";
}

TEST(HostMemory, TheErrorNamesTheThingTheNeedAndWhatIsLeft) {
  EXPECT_EQ(host_memory_error("model.gguf", 3ull << 30, "its weights", 512ull << 20).what(),
            std::string("model.gguf: needs 3.0 GiB of host memory for its weights; 512.0 MiB available"));
  EXPECT_EQ(memory_size_text(12 * 1024), "12.0 KiB");
  EXPECT_EQ(memory_size_text(1536ull << 20), "1.5 GiB");
  EXPECT_THROW(require_host_memory("prompt", kUnknown - 1, "everything"), InputError);
  EXPECT_NO_THROW(require_host_memory("prompt", 1, "a byte"));
}

TEST(HostMemory, ABadAllocReadsAsOutOfHostMemory) {
  const std::string text = error_text(std::bad_alloc());
  EXPECT_EQ(text.rfind("out of host memory (an allocation failed; ", 0), 0u) << text;
  EXPECT_NE(text.find(" available)"), std::string::npos) << text;
  EXPECT_EQ(error_text(std::runtime_error("trace.h5: not a trace")), "trace.h5: not a trace");
}

TEST(HostMemory, AThreadThatCouldNotStartReadsAsOutOfHostMemory) {
  // What std::thread throws when pthread_create fails (EAGAIN: no memory for its stack, or the
  // process's thread limit).
  const std::system_error failed(std::make_error_code(std::errc::resource_unavailable_try_again));
  EXPECT_TRUE(out_of_host_memory(failed));
  const std::string text = error_text(failed);
  EXPECT_EQ(text.rfind("out of host memory (a thread could not start; ", 0), 0u) << text;
  const std::system_error other(std::make_error_code(std::errc::invalid_argument), "pthread_create");
  EXPECT_FALSE(out_of_host_memory(other));
  EXPECT_EQ(error_text(other), other.what());
  EXPECT_TRUE(out_of_host_memory(std::bad_alloc()));
  EXPECT_FALSE(out_of_host_memory(std::runtime_error("x")));
}

}  // namespace
}  // namespace kvs

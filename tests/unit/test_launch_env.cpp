// Launcher detection and validation with an injected environment.
#include <functional>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "core/bootstrap/launch_env.h"
#include "core/common/status.h"

using weft::Error;
using weft::Status;
using weft::bootstrap::LaunchEnv;
using weft::bootstrap::read_launch_env;

namespace {

using Env = std::map<std::string, std::string>;

LaunchEnv read(const Env& env) {
  return read_launch_env([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

// Expects invalid_argument and returns the message.
std::string read_error(const Env& env) {
  try {
    read(env);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument) << e.what();
    return e.message();
  }
  ADD_FAILURE() << "expected an error";
  return std::string();
}

void expect_mentions(const std::string& msg, std::initializer_list<const char*> words) {
  for (const char* w : words) EXPECT_NE(msg.find(w), std::string::npos) << "'" << w << "' not in: " << msg;
}

const Env kAddr = {{"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}};

Env with(Env base, const Env& more) {
  for (const auto& [k, v] : more) base[k] = v;
  return base;
}

}  // namespace

TEST(LaunchEnv, Weft) {
  LaunchEnv e = read({{"WEFT_RANK", "2"},
                      {"WEFT_WORLD_SIZE", "4"},
                      {"WEFT_LOCAL_RANK", "0"},
                      {"WEFT_MASTER_ADDR", "10.0.0.1"},
                      {"WEFT_MASTER_PORT", "1234"},
                      {"WEFT_JOB_SECRET", "abc"},
                      {"WEFT_STORE_HOSTED", "1"}});
  EXPECT_EQ(e.source, "weft");
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 0);
  EXPECT_EQ(e.master_addr, "10.0.0.1");
  EXPECT_EQ(e.master_port, 1234);
  EXPECT_EQ(e.secret, "abc");
  EXPECT_TRUE(e.store_hosted);
}

TEST(LaunchEnv, Torchrun) {
  LaunchEnv e = read(with(kAddr, {{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}}));
  EXPECT_EQ(e.source, "torchrun");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.master_addr, "node0");
  EXPECT_EQ(e.master_port, 29500);
  EXPECT_FALSE(e.store_hosted);
  EXPECT_FALSE(e.secret.empty());
}

TEST(LaunchEnv, OpenMpi) {
  LaunchEnv e = read(with(kAddr, {{"OMPI_COMM_WORLD_RANK", "5"},
                                  {"OMPI_COMM_WORLD_SIZE", "6"},
                                  {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}}));
  EXPECT_EQ(e.source, "openmpi");
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 6);
  EXPECT_EQ(e.local_rank, 2);
}

TEST(LaunchEnv, Pmi) {
  LaunchEnv e = read(with(kAddr, {{"PMI_RANK", "0"}, {"PMI_SIZE", "1"}}));
  EXPECT_EQ(e.source, "pmi");
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.world_size, 1);
  EXPECT_EQ(e.local_rank, -1);
}

TEST(LaunchEnv, Slurm) {
  LaunchEnv e = read(with(kAddr, {{"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "3"}}));
  EXPECT_EQ(e.source, "slurm");
  EXPECT_EQ(e.rank, 7);
  EXPECT_EQ(e.world_size, 16);
  EXPECT_EQ(e.local_rank, 3);
}

TEST(LaunchEnv, LocalRankIsOptional) {
  LaunchEnv e = read(with(kAddr, {{"RANK", "0"}, {"WORLD_SIZE", "2"}}));
  EXPECT_EQ(e.local_rank, -1);
}

TEST(LaunchEnv, PrecedenceFirstLauncherWins) {
  Env all = with(kAddr, {{"WEFT_RANK", "1"},
                         {"WEFT_WORLD_SIZE", "2"},
                         {"RANK", "3"},
                         {"WORLD_SIZE", "4"},
                         {"OMPI_COMM_WORLD_RANK", "5"},
                         {"OMPI_COMM_WORLD_SIZE", "6"},
                         {"PMI_RANK", "7"},
                         {"PMI_SIZE", "8"},
                         {"SLURM_PROCID", "9"},
                         {"SLURM_NTASKS", "10"}});
  LaunchEnv e = read(all);
  EXPECT_EQ(e.source, "weft");
  EXPECT_EQ(e.rank, 1);
  all.erase("WEFT_RANK");
  all.erase("WEFT_WORLD_SIZE");
  e = read(all);
  EXPECT_EQ(e.source, "torchrun");
  EXPECT_EQ(e.world_size, 4);
  all.erase("RANK");
  all.erase("WORLD_SIZE");
  e = read(all);
  EXPECT_EQ(e.source, "openmpi");
  EXPECT_EQ(e.world_size, 6);
  all.erase("OMPI_COMM_WORLD_RANK");
  all.erase("OMPI_COMM_WORLD_SIZE");
  e = read(all);
  EXPECT_EQ(e.source, "pmi");
  EXPECT_EQ(e.world_size, 8);
  all.erase("PMI_RANK");
  all.erase("PMI_SIZE");
  e = read(all);
  EXPECT_EQ(e.source, "slurm");
  EXPECT_EQ(e.world_size, 10);
}

TEST(LaunchEnv, StoreAddressPrecedence) {
  Env env = {{"RANK", "0"},         {"WORLD_SIZE", "2"},       {"MASTER_ADDR", "torch-host"},
             {"MASTER_PORT", "111"}, {"WEFT_MASTER_ADDR", "weft-host"}, {"WEFT_MASTER_PORT", "222"}};
  LaunchEnv e = read(env);
  EXPECT_EQ(e.master_addr, "weft-host");
  EXPECT_EQ(e.master_port, 222);
  env.erase("WEFT_MASTER_PORT");
  e = read(env);
  EXPECT_EQ(e.master_addr, "weft-host");
  EXPECT_EQ(e.master_port, 111);
  env.erase("WEFT_MASTER_ADDR");
  e = read(env);
  EXPECT_EQ(e.master_addr, "torch-host");
}

TEST(LaunchEnv, WeakDefaultSecretIsDeterministic) {
  Env env = with(kAddr, {{"RANK", "0"}, {"WORLD_SIZE", "4"}});
  std::string s0 = read(env).secret;
  env["RANK"] = "3";
  EXPECT_EQ(read(env).secret, s0) << "ranks of one job must derive the same secret";
  env["WORLD_SIZE"] = "5";
  EXPECT_NE(read(env).secret, s0);
  env["WORLD_SIZE"] = "4";
  env["MASTER_PORT"] = "29501";
  EXPECT_NE(read(env).secret, s0);
  env["WEFT_JOB_SECRET"] = "explicit";
  EXPECT_EQ(read(env).secret, "explicit");
}

TEST(LaunchEnv, StoreHosted) {
  Env env = with(kAddr, {{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_FALSE(read(env).store_hosted);
  env["WEFT_STORE_HOSTED"] = "0";
  EXPECT_FALSE(read(env).store_hosted);
  env["WEFT_STORE_HOSTED"] = "1";
  EXPECT_TRUE(read(env).store_hosted);
  env["WEFT_STORE_HOSTED"] = "yes";
  expect_mentions(read_error(env), {"WEFT_STORE_HOSTED", "yes"});
}

TEST(LaunchEnv, NoLauncher) {
  std::string msg = read_error(kAddr);
  expect_mentions(msg, {"WEFT_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"});
}

TEST(LaunchEnv, HalfSetLauncherIsAnError) {
  expect_mentions(read_error(with(kAddr, {{"WEFT_RANK", "0"}})), {"WEFT_WORLD_SIZE", "not set"});
  expect_mentions(read_error(with(kAddr, {{"WORLD_SIZE", "2"}})), {"RANK", "not set"});
  // A half-set weft launcher does not fall through to a complete torchrun one.
  expect_mentions(read_error(with(kAddr, {{"WEFT_WORLD_SIZE", "2"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}})),
                  {"WEFT_RANK"});
}

TEST(LaunchEnv, MalformedNumbers) {
  struct Case {
    const char* var;
    const char* value;
  };
  const Case cases[] = {
      {"RANK", "abc"},       {"RANK", "1x"},          {"RANK", ""},          {"RANK", " 1"},
      {"RANK", "1 "},        {"RANK", "-1"},          {"RANK", "4"},         {"RANK", "99999999999999999999"},
      {"RANK", "0x1"},       {"RANK", "+"},           {"WORLD_SIZE", "0"},   {"WORLD_SIZE", "-3"},
      {"WORLD_SIZE", "2.5"}, {"WORLD_SIZE", "3000000000"}, {"LOCAL_RANK", "x"}, {"LOCAL_RANK", "-1"},
      {"LOCAL_RANK", "4"},   {"MASTER_PORT", "0"},    {"MASTER_PORT", "70000"}, {"MASTER_PORT", "-5"},
      {"MASTER_PORT", "80a"}, {"MASTER_PORT", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.var) + "='" + c.value + "'");
    Env env = with(kAddr, {{"RANK", "1"}, {"WORLD_SIZE", "4"}});
    env[c.var] = c.value;
    std::string msg = read_error(env);
    expect_mentions(msg, {c.var, "expected"});
    EXPECT_NE(msg.find(std::string("'") + c.value + "'"), std::string::npos) << "value not quoted: " << msg;
  }
}

TEST(LaunchEnv, RankOutOfRangeNamesWorldSize) {
  std::string msg = read_error(with(kAddr, {{"SLURM_PROCID", "16"}, {"SLURM_NTASKS", "16"}}));
  expect_mentions(msg, {"SLURM_PROCID", "'16'", "0..15", "SLURM_NTASKS=16"});
}

TEST(LaunchEnv, WeftPortBadValueNamesWeftVariable) {
  std::string msg = read_error(with(kAddr, {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"WEFT_MASTER_PORT", "65536"}}));
  expect_mentions(msg, {"WEFT_MASTER_PORT", "'65536'", "1..65535"});
  EXPECT_EQ(read(with(kAddr, {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"WEFT_MASTER_PORT", "65535"}})).master_port, 65535);
  EXPECT_EQ(read(with(kAddr, {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"WEFT_MASTER_PORT", "1"}})).master_port, 1);
}

TEST(LaunchEnv, MissingStoreAddress) {
  std::string msg = read_error({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}});
  expect_mentions(msg, {"MASTER_ADDR", "WEFT_MASTER_ADDR", "Open MPI", "Slurm"});
  msg = read_error({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"MASTER_ADDR", "h"}});
  expect_mentions(msg, {"MASTER_PORT"});
  msg = read_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", ""}, {"MASTER_PORT", "1"}});
  expect_mentions(msg, {"MASTER_ADDR", "empty"});
}

TEST(LaunchEnv, ProcessEnvironment) {
  ::setenv("WEFT_RANK", "1", 1);
  ::setenv("WEFT_WORLD_SIZE", "3", 1);
  ::setenv("WEFT_MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("WEFT_MASTER_PORT", "4242", 1);
  LaunchEnv e = read_launch_env();
  ::unsetenv("WEFT_RANK");
  ::unsetenv("WEFT_WORLD_SIZE");
  ::unsetenv("WEFT_MASTER_ADDR");
  ::unsetenv("WEFT_MASTER_PORT");
  EXPECT_EQ(e.source, "weft");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.world_size, 3);
  EXPECT_EQ(e.master_port, 4242);
}

// Rank 0's one line at WEFT_DEBUG=info when its store is open to anyone who reaches the port: only
// without WEFT_JOB_SECRET and only when the store listens beyond loopback.
TEST(LaunchEnv, OpenStoreWarning) {
  const LaunchEnv torchrun = read(with(kAddr, {{"RANK", "0"}, {"WORLD_SIZE", "2"}}));
  EXPECT_TRUE(torchrun.weak_secret);
  const std::string warning = weft::bootstrap::open_store_warning(torchrun, "0.0.0.0");
  for (const char* w : {"29500", "WEFT_JOB_SECRET", "torchrun", "anyone"}) {
    EXPECT_NE(warning.find(w), std::string::npos) << "'" << w << "' not in: " << warning;
  }
  EXPECT_EQ(weft::bootstrap::open_store_warning(torchrun, "127.0.0.1"), "");
  const LaunchEnv secret = read(with(kAddr, {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"WEFT_JOB_SECRET", "s3cr3t"}}));
  EXPECT_FALSE(secret.weak_secret);
  EXPECT_EQ(weft::bootstrap::open_store_warning(secret, "0.0.0.0"), "");
}

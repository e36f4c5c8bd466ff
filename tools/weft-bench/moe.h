// weft-bench moe: dispatch and combine (weft/moe.h) throughput and latency on host memory.
//
//   weftrun -n 4 build/bin/weft-bench moe [--quick] [--tokens 128,512,2048,8192]
//       [--hidden 1024,4096,7168] [--topk 8] [--experts 64] [--dtype float32,bf16]
//       [--routing balanced,imbalanced] [-n ITERS] [-w WARMUP] [--seed S] [--max-mib M]
//       [--routing-dir DIR] [--csv FILE]
//
// Bytes, as DeepEP counts them: dispatch moves each token's H * elem bytes once per rank that
// holds one of its experts (the token's own rank included); combine moves H * elem bytes once
// per kept (token, slot) row returned. The byte counts are per rank (the mean over ranks, which
// differ under imbalanced routing), and GB/s = those bytes / the slowest rank's median time.
// Each iteration: a barrier, then the timed call, so every rank starts together.
//
// Every case is checked once after timing, with the expert an identity: every received row must
// equal its source token bit for bit, the rows must be exactly the (token, local expert) pairs of
// every rank's routing (regenerated here), and combine of those rows with weights summing to 1
// must give back x within rounding. A wrong element makes the run exit 1 with "FAILED".
#pragma once

namespace weftbench {

// argv[0] is the program, argv[1] "moe". Returns the process exit status.
int moe_main(int argc, char** argv);

}  // namespace weftbench

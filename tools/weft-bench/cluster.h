// weft-bench --cluster-file PATH: measures what weft-plan's cluster file describes and writes it.
//
//   weftrun -n 8 build/bin/weft-bench --cluster-file cluster.txt [--memory BYTES] [--flops F]
//       [--pattern ring|pair] [--large SIZE] [--seconds S] [--collectives off|on]
//
// Point-to-point latency and bandwidth between ranks of one host (and between hosts when the ranks
// span several), measured with weft's point-to-point calls (cluster_probe.h says how); a rank's
// FLOP/s; memory per rank.
// The written line is `cluster hosts= ranks_per_host= memory= flops= intra_bw= intra_lat= inter_bw=
// inter_lat=` (bytes, FLOP/s, bytes/s, seconds), with `--collectives on` also `intra_allreduce=
// intra_alltoall=` (the busy probe's seconds per group size), preceded by '#' comments saying how
// each number was measured. Rank 0 writes the file and prints the same lines.
#pragma once

namespace weftbench {

// True when argv holds --cluster-file (main.cpp hands the whole command line over).
bool wants_cluster_file(int argc, char** argv);
// Returns the process exit status (0 ok, 2 usage, 3 a failed weft call or an unwritable file).
int cluster_main(int argc, char** argv);

}  // namespace weftbench

#!/usr/bin/python3
"""moe_peer: the torch.distributed (gloo) peer of `weft-bench moe`, for bench/compare-moe.

Two modes.

dispatch (default; launch with anything that sets torchrun's RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT, e.g. build/bin/weftrun -n 4 /usr/bin/python3 bench/moe_peer.py --routing-dir D):
an expert-parallel dispatcher written the way Megatron-LM's all-to-all token dispatcher does it,
in torch ops on the CPU:
  dispatch  permute the tokens by expert (one row per (token, slot), stable: expert-major, then
            token), all_to_all_single of the per-expert counts, all_to_all_single of the rows
            with the per-rank splits, then sort the received chunks from (source rank, local
            expert) order to (local expert, source rank) order;
  combine   the reverse: unsort, all_to_all_single back, then unpermute: each row times its
            routing weight (float32), index_add_ into a float32 [T, H], cast to the token dtype.
The routing (indices and weights) is read from the files `weft-bench moe --routing-dir D` wrote,
so both run on the very same selections. Bytes, time and check follow weft-bench moe exactly
(the same DeepEP byte counts from the routing, the slowest rank's median of iterations each
after a barrier, and combine(dispatch(x)) == x with an identity expert). Note Megatron's
dispatcher moves one row per (token, slot), so it sends more than the byte count it is credited
with when a token has two experts on one rank; the counted bytes are the same for both sides, so
the ratio of throughputs is the ratio of times.

router (one process): tokens/s of weft_router_forward (through the Python binding's weft.route when
it imports, else ctypes on libweft: --via; SOFTMAX scores, top-k,
weights renormalised over the k) against the same routing in torch ops (softmax, topk, divide by
the sum), on the same float32 logits, median of iterations; the indices must agree exactly and
the weights within 1e-6.
"""
import argparse
import ctypes
import os
import statistics
import sys
import time

import torch

DTYPES = {"float32": torch.float32, "bf16": torch.bfloat16}


def split_list(s, conv=str):
    return [conv(v) for v in s.split(",") if v]


def routing_path(d, kind, tokens, topk, experts, n, rank):
    return os.path.join(d, f"routing_{kind}_T{tokens}_k{topk}_E{experts}_n{n}_r{rank}.bin")


def read_routing(path, tokens, topk):
    import numpy as np

    if not os.path.exists(path):
        raise SystemExit(f"moe_peer: no routing file {path}: run weft-bench moe --routing-dir with the same cases "
                         "and rank count first")
    raw = np.fromfile(path, dtype=np.uint8)
    n = tokens * topk
    if raw.size != 8 * n:
        raise SystemExit(f"moe_peer: {path}: {raw.size} bytes, expected {8 * n} (int32 + float32 [{tokens}, {topk}])")
    idx = torch.from_numpy(raw[: 4 * n].view(np.int32).copy()).to(torch.int64).view(tokens, topk)
    w = torch.from_numpy(raw[4 * n:].view(np.float32).copy()).view(tokens, topk)
    return idx, w


def case_iters(iters, token_bytes):
    """Up to 10x the iterations for small cases, as weft-bench moe (each timed loop ~8 MiB)."""
    return iters * min(10, max(1, (8 << 20) // max(token_bytes, 1)))


def token_values(rank, tokens, hidden):
    """x[t, h] = ((t*131 + h*7 + rank*17) mod 255 - 127) / 64, as weft-bench moe."""
    t = torch.arange(tokens, dtype=torch.int64).unsqueeze(1)
    h = torch.arange(hidden, dtype=torch.int64).unsqueeze(0)
    return (((t * 131 + h * 7 + rank * 17) % 255) - 127).to(torch.float32) / 64.0


def wire(t):
    """torch 1.13's gloo moves no bfloat16 nor int16 ("Invalid scalar type"): send the same bytes as float16 (alltoall only copies)."""
    return t.view(torch.float16) if t.dtype == torch.bfloat16 else t


class MegatronStyleDispatcher:
    def __init__(self, experts, n, rank):
        import torch.distributed as dist

        self.dist = dist
        self.E, self.n, self.rank = experts, n, rank
        self.per_rank = (experts + n - 1) // n  # torch.chunk's block, as weft's default placement
        self.L = max(0, min(experts, (rank + 1) * self.per_rank) - rank * self.per_rank)

    def dispatch(self, x, indices):
        dist, n, c = self.dist, self.n, self.per_rank
        T, k = indices.shape
        flat = indices.reshape(-1)
        # permute: stable sort of the (token, slot) pairs by expert -> expert-major, token order
        order = torch.sort(flat, stable=True).indices
        self.order = order
        self.row_token = torch.div(order, k, rounding_mode="floor")
        permuted = x.index_select(0, self.row_token)
        per_expert = torch.bincount(flat, minlength=n * c)  # padded to n blocks of c
        input_splits = per_expert.view(n, c).sum(1)
        counts = torch.empty(n * c, dtype=torch.int64)
        dist.all_to_all_single(counts, per_expert)  # block q: what rank q sends to my experts
        self.global_counts = counts.view(n, c)[:, : max(self.L, 0)]
        output_splits = self.global_counts.sum(1)
        self.input_splits = input_splits.tolist()
        self.output_splits = output_splits.tolist()
        received = torch.empty((sum(self.output_splits), x.shape[1]), dtype=x.dtype)
        dist.all_to_all_single(wire(received), wire(permuted), self.output_splits, self.input_splits)
        # sort_chunks_by_idxs: (source rank, local expert) -> (local expert, source rank)
        chunks = torch.split(received, self.global_counts.reshape(-1).tolist())
        L = self.L
        self.sorted_sizes = [int(self.global_counts[q, j]) for j in range(L) for q in range(n)]
        return torch.cat([chunks[q * L + j] for j in range(L) for q in range(n)]) if L else received

    def combine(self, expert_out, weights, dtype, tokens, hidden):
        dist, n, L = self.dist, self.n, self.L
        chunks = torch.split(expert_out, self.sorted_sizes)
        back_order = torch.cat([chunks[j * n + q] for q in range(n) for j in range(L)]) if L else expert_out
        back = torch.empty((sum(self.input_splits), hidden), dtype=dtype)
        dist.all_to_all_single(wire(back), wire(back_order.contiguous()), self.input_splits, self.output_splits)
        # unpermute with the routing weights, accumulated in float32
        w = weights.reshape(-1).index_select(0, self.order).unsqueeze(1)
        out = torch.zeros((tokens, hidden), dtype=torch.float32)
        out.index_add_(0, self.row_token, back.to(torch.float32) * w)
        return out.to(dtype)


def dispatch_main(a):
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(a.torch_threads)
    csv = None
    if rank == 0:
        print(f"# moe_peer (Megatron-style all-to-all dispatcher, torch {torch.__version__}, gloo), {n} ranks, "
              f"torch threads {a.torch_threads}")
        print(f"# experts {a.experts}, top-k {a.topk}, warm-up {a.warmup}, iterations {a.iters}; bytes, time and "
              "check as weft-bench moe")
        print(f"#{'tokens':>6} {'hidden':>6} {'type':>8} {'routing':>10} {'disp(MB)':>10} {'disp(us)':>9} "
              f"{'GB/s':>7} {'comb(MB)':>10} {'comb(us)':>9} {'GB/s':>7} {'total':>7} {'#wrong':>6}")
        if a.csv:
            csv = open(a.csv, "w")
            csv.write("library,nranks,tokens,hidden,dtype,routing,iters,dispatch_bytes,combine_bytes,"
                      "dispatch_us,combine_us,dispatch_gbps,combine_gbps,total_gbps,wrong\n")
    c = (a.experts + n - 1) // n
    total_wrong = 0
    for dname in a.dtype:
        dtype = DTYPES[dname]
        elem = 4 if dtype == torch.float32 else 2
        for hidden in a.hidden:
            for kind in a.routing:
                for tokens in a.tokens:
                    if tokens * a.topk * hidden * elem / 1048576.0 > a.max_mib:
                        if rank == 0:
                            print(f" {tokens:6d} {hidden:6d} {dname:>8} {kind:>10}  skipped (--max-mib)")
                        continue
                    sel = [read_routing(routing_path(a.routing_dir, kind, tokens, a.topk, a.experts, n, q),
                                        tokens, a.topk) for q in range(n)]
                    # DeepEP's byte counts from the routing, exactly as weft-bench moe
                    to_ranks = sum(int(torch.zeros(tokens, n, dtype=torch.int64).scatter_(1, s[0] // c, 1).sum())
                                   for s in sel)
                    disp_bytes = to_ranks * hidden * elem / n
                    comb_bytes = tokens * a.topk * n * hidden * elem / n
                    idx, w = sel[rank]
                    x = token_values(rank, tokens, hidden).to(dtype)
                    d = MegatronStyleDispatcher(a.experts, n, rank)
                    iters = case_iters(a.iters, tokens * hidden * elem)
                    td, tc = [], []
                    for it in range(a.warmup + iters):
                        dist.barrier()
                        t0 = time.perf_counter()
                        recv = d.dispatch(x, idx)
                        t1 = time.perf_counter()
                        expert_out = recv.clone()  # the identity expert, into memory of its own
                        dist.barrier()
                        t2 = time.perf_counter()
                        out = d.combine(expert_out, w, dtype, tokens, hidden)
                        t3 = time.perf_counter()
                        if it >= a.warmup:
                            td.append((t1 - t0) * 1e6)
                            tc.append((t3 - t2) * 1e6)
                    slow = torch.tensor([statistics.median(td), statistics.median(tc)], dtype=torch.float64)
                    dist.all_reduce(slow, op=dist.ReduceOp.MAX)
                    # check: the last iteration's output (fresh buffers every iteration)
                    want = x.to(torch.float32)
                    tol = 1e-5 * want.abs() if dtype == torch.float32 else torch.zeros_like(want)
                    bad = int(((out.to(torch.float32) - want).abs() > tol).sum())
                    expected_rows = sum(int(((s[0] // c) == rank).sum()) for s in sel)
                    bad += abs(expected_rows - recv.shape[0])
                    wrong = torch.tensor([bad], dtype=torch.int64)
                    dist.all_reduce(wrong)
                    total_wrong += int(wrong)
                    if rank != 0:
                        continue
                    dus, cus = float(slow[0]), float(slow[1])
                    dg, cg = disp_bytes / (dus * 1e3), comb_bytes / (cus * 1e3)
                    tg = (disp_bytes + comb_bytes) / ((dus + cus) * 1e3)
                    print(f" {tokens:6d} {hidden:6d} {dname:>8} {kind:>10} {disp_bytes / 1e6:10.2f} {dus:9.1f} "
                          f"{dg:7.2f} {comb_bytes / 1e6:10.2f} {cus:9.1f} {cg:7.2f} {tg:7.2f} {int(wrong):6d}",
                          flush=True)
                    if csv:
                        csv.write(f"torch-gloo,{n},{tokens},{hidden},{dname},{kind},{iters},{disp_bytes:.0f},"
                                  f"{comb_bytes:.0f},{dus:.3f},{cus:.3f},{dg:.6f},{cg:.6f},{tg:.6f},{int(wrong)}\n")
                        csv.flush()
    if csv:
        csv.close()
    if rank == 0:
        print(f"# wrong values: {total_wrong} {'FAILED' if total_wrong else 'OK'}", flush=True)
    dist.destroy_process_group()
    return 1 if total_wrong else 0


# ------------------------------------------------------------------ router


class TensorView(ctypes.Structure):  # weft_tensor_t (weft/common.h)
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int), ("device_id", ctypes.c_int),
                ("ndim", ctypes.c_int), ("dtype", ctypes.c_int), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class RouterConfig(ctypes.Structure):  # weft_router_config_t (weft/moe.h)
    _fields_ = [("struct_size", ctypes.c_size_t), ("experts", ctypes.c_int), ("topk", ctypes.c_int),
                ("score", ctypes.c_int), ("normalize", ctypes.c_int), ("groups", ctypes.c_int),
                ("topk_groups", ctypes.c_int), ("bias", ctypes.POINTER(ctypes.c_float)), ("drop", ctypes.c_int),
                ("capacity_factor", ctypes.c_double), ("aux_loss_coeff", ctypes.c_float),
                ("z_loss_coeff", ctypes.c_float)]


class RouterResult(ctypes.Structure):  # weft_router_result_t (weft/moe.h)
    _fields_ = [("struct_size", ctypes.c_size_t), ("indices", ctypes.POINTER(ctypes.c_int32)),
                ("weights", ctypes.POINTER(ctypes.c_float)), ("tokens_per_expert", ctypes.POINTER(ctypes.c_int64)),
                ("selected_per_expert", ctypes.POINTER(ctypes.c_int64)), ("aux_loss", ctypes.c_float),
                ("z_loss", ctypes.c_float)]


def router_main(a):
    lib = ctypes.CDLL(a.lib)
    if not hasattr(lib, "weft_router_forward"):
        raise SystemExit(f"moe_peer router: {a.lib} has no weft_router_forward (built without the router)")
    lib.weft_router_forward.restype = ctypes.c_int
    lib.weft_last_error.restype = ctypes.c_char_p
    binding = None
    if a.via in ("auto", "binding"):
        try:  # the repository's binding, on this very library
            os.environ["WEFT_LIBRARY"] = os.path.abspath(a.lib)
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bindings",
                                            "python"))
            import weft as binding  # noqa: E402
            if not hasattr(binding, "route"):
                binding = None
        except ImportError:
            binding = None
        if binding is None and a.via == "binding":
            raise SystemExit("moe_peer router: the Python binding (weft.route) cannot be imported")
    torch.set_num_threads(a.torch_threads)
    E, k = a.experts, a.topk
    print(f"# router: SOFTMAX scores over {E} experts, top-{k}, weights renormalised; float32 logits; "
          f"median of {a.iters} after {a.warmup} warm-up; torch {torch.__version__} threads {a.torch_threads}; "
          f"weft via {'the Python binding (weft.route)' if binding is not None else 'ctypes on libweft'}")
    print(f"#{'tokens':>7} {'weft(us)':>10} {'weft tok/s':>12} {'torch(us)':>10} {'torch tok/s':>12} "
          f"{'ratio':>6} {'#wrong':>6}")
    rows, total_wrong = [], 0
    for T in a.tokens:
        g = torch.Generator().manual_seed(a.seed + T)
        logits = torch.randn(T, E, generator=g, dtype=torch.float32)
        shape = (ctypes.c_int64 * 2)(T, E)
        view = TensorView(logits.data_ptr(), 1, 0, 2, 1, shape, None, 0)  # CPU, FLOAT32
        cfg = RouterConfig(ctypes.sizeof(RouterConfig), E, k, 0, 1, 0, 0, None, 0, 1.0, 0.0, 0.0)
        idx = torch.empty(T, k, dtype=torch.int32)
        w = torch.empty(T, k, dtype=torch.float32)
        res = RouterResult(ctypes.sizeof(RouterResult), ctypes.cast(idx.data_ptr(), ctypes.POINTER(ctypes.c_int32)),
                           ctypes.cast(w.data_ptr(), ctypes.POINTER(ctypes.c_float)), None, None, 0.0, 0.0)

        def weft_once():
            if binding is not None:  # weft.route: the Python binding (new numpy outputs per call)
                r = binding.route(logits, experts=E, topk=k, score="softmax", normalize=True)
                idx.copy_(torch.from_numpy(r.indices))
                w.copy_(torch.from_numpy(r.weights))
                return
            st = lib.weft_router_forward(ctypes.byref(view), ctypes.byref(cfg), ctypes.byref(res), None)
            if st != 0:
                raise SystemExit(f"moe_peer router: weft_router_forward failed ({st}): {lib.weft_last_error().decode()}")

        def torch_once():
            p = torch.softmax(logits, dim=-1)
            tw, ti = torch.topk(p, k, dim=-1)
            return tw / tw.sum(dim=-1, keepdim=True), ti

        def timed(fn):
            for _ in range(a.warmup):
                fn()
            ts = []
            for _ in range(a.iters):
                t0 = time.perf_counter()
                fn()
                ts.append((time.perf_counter() - t0) * 1e6)
            return statistics.median(ts)

        weft_us = timed(weft_once)
        torch_us = timed(torch_once)
        tw, ti = torch_once()
        wrong = int((ti.to(torch.int32) != idx).sum()) + int(((tw - w).abs() > 1e-6).sum())
        total_wrong += wrong
        ratio = torch_us / weft_us
        rows.append((T, weft_us, torch_us, ratio, wrong))
        print(f" {T:7d} {weft_us:10.1f} {T / weft_us * 1e6:12.4g} {torch_us:10.1f} {T / torch_us * 1e6:12.4g} "
              f"{ratio:6.2f} {wrong:6d}", flush=True)
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("tokens,experts,topk,weft_us,torch_us,ratio,wrong\n")
            for T, wu, tu, r, wr in rows:
                f.write(f"{T},{E},{k},{wu:.3f},{tu:.3f},{r:.4f},{wr}\n")
    print(f"# wrong values: {total_wrong} {'FAILED' if total_wrong else 'OK'}", flush=True)
    return 1 if total_wrong else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", nargs="?", default="dispatch", choices=["dispatch", "router"])
    ap.add_argument("--quick", action="store_true", help="tokens 128,512, hidden 1024, 3 iterations, 1 warm-up")
    ap.add_argument("--tokens", default=None, help="comma list (default 128,512,2048,8192)")
    ap.add_argument("--hidden", default=None, help="comma list (default 1024,4096,7168)")
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--dtype", default="float32,bf16")
    ap.add_argument("--routing", default="balanced,imbalanced")
    ap.add_argument("-n", "--iters", type=int, default=None)
    ap.add_argument("-w", "--warmup", type=int, default=None)
    ap.add_argument("--max-mib", type=float, default=1024.0)
    ap.add_argument("--routing-dir", help="where weft-bench moe --routing-dir wrote the routing (dispatch mode)")
    ap.add_argument("--lib", help="libweft.so (router mode)")
    ap.add_argument("--seed", type=int, default=1234, help="logits seed (router mode)")
    ap.add_argument("--torch-threads", type=int, default=1)
    ap.add_argument("--via", choices=["auto", "binding", "ctypes"], default="auto",
                    help="router mode: weft.route (the Python binding) or ctypes; auto = the binding when importable")
    ap.add_argument("--csv")
    a = ap.parse_args()
    a.tokens = split_list(a.tokens or ("128,512" if a.quick else "128,512,2048,8192"), int)
    a.hidden = split_list(a.hidden or ("1024" if a.quick else "1024,4096,7168"), int)
    a.iters = a.iters if a.iters is not None else (3 if a.quick else 10)
    a.warmup = a.warmup if a.warmup is not None else (1 if a.quick else 2)
    a.dtype = split_list(a.dtype)
    a.routing = split_list(a.routing)
    for d in a.dtype:
        if d not in DTYPES:
            ap.error(f"--dtype: expected float32 or bf16, got '{d}'")
    if a.mode == "router":
        if not a.lib:
            ap.error("router mode needs --lib path/to/libweft.so")
        return router_main(a)
    if not a.routing_dir:
        ap.error("dispatch mode needs --routing-dir (written by weft-bench moe --routing-dir)")
    return dispatch_main(a)


if __name__ == "__main__":
    sys.exit(main())

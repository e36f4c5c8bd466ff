//! Layout and linking checks of the declarations against the header (x86-64 / aarch64 LP64).
use super::*;

#[test]
fn layouts_match_the_header() {
    // x86-64 / aarch64 LP64: size_t, int64_t, int (+pad), pointer, int (+pad).
    assert_eq!(core::mem::size_of::<weft_comm_config_t>(), 40);
    assert_eq!(core::mem::size_of::<weft_unique_id_t>(), WEFT_UNIQUE_ID_BYTES);
    // int (+pad), pointer, size_t, int, int.
    assert_eq!(core::mem::size_of::<weft_p2p_op_t>(), 32);
    assert_eq!(core::mem::offset_of!(weft_p2p_op_t, buf), 8);
    assert_eq!(core::mem::offset_of!(weft_p2p_op_t, peer), 28);
    assert_eq!(WEFT_COMM_CONFIG_INIT.struct_size, 40);
    assert_eq!(WEFT_VERSION_CODE, 100);
}

#[test]
fn mesh_layouts_match_the_header() {
    // sizeof/offsetof of capi/include/weft/common.h and mesh.h on LP64.
    assert_eq!(core::mem::size_of::<weft_tensor_t>(), 48);
    assert_eq!(core::mem::offset_of!(weft_tensor_t, shape), 24);
    assert_eq!(core::mem::offset_of!(weft_tensor_t, byte_offset), 40);
    assert_eq!(core::mem::size_of::<weft_placement_t>(), 12);
    assert_eq!(core::mem::size_of::<weft_redistribute_step_t>(), 48);
    assert_eq!(core::mem::offset_of!(weft_redistribute_step_t, to), 20);
    assert_eq!(core::mem::offset_of!(weft_redistribute_step_t, bytes_sent), 32);
    assert_eq!(core::mem::size_of::<weft_mesh_config_t>(), 24);
    assert_eq!(WEFT_MESH_CONFIG_INIT.struct_size, 24);
    assert_eq!(WEFT_SHARDED_CONFIG_INIT.struct_size, 16);
    assert_eq!(WEFT_CHECKPOINT_CONFIG_INIT.struct_size, 16);
    assert_eq!(WEFT_CHECKPOINT_CONFIG_INIT.fsync, 1);
    assert_eq!(WEFT_PLACEMENT_REPLICATE_INIT.kind, WEFT_REPLICATE);
}

#[test]
fn library_links_and_reports_its_abi() {
    let (mut code, mut abi) = (-1, -1);
    let st = unsafe { weft_version(&mut code, &mut abi) };
    assert_eq!(st, WEFT_OK);
    assert_eq!(abi, WEFT_ABI_VERSION);
    assert_eq!(code, WEFT_VERSION_CODE);
    let mut size = 0usize;
    assert_eq!(unsafe { weft_dtype_size(WEFT_BFLOAT16, &mut size) }, WEFT_OK);
    assert_eq!(size, 2);
    assert_eq!(unsafe { weft_dtype_size(WEFT_NUM_DTYPES, &mut size) }, WEFT_ERR_INVALID_ARGUMENT);
}

#[test]
fn training_layouts_match_the_header() {
    // sizeof/offsetof of capi/include/weft/training.h on LP64 (measured with the C compiler).
    use core::mem::{offset_of, size_of};
    assert_eq!(size_of::<weft_bucketer_config_t>(), 56);
    assert_eq!(offset_of!(weft_bucketer_config_t, error_feedback), 48);
    assert_eq!(offset_of!(weft_bucketer_config_t, reduction), 32);
    assert_eq!(offset_of!(weft_bucketer_config_t, names), 40);
    assert_eq!(size_of::<weft_bucketer_stats_t>(), 40);
    assert_eq!(size_of::<weft_optimizer_config_t>(), 40);
    assert_eq!(offset_of!(weft_optimizer_config_t, weight_decay), 32);
    assert_eq!(size_of::<weft_zero_config_t>(), 120);
    assert_eq!(offset_of!(weft_zero_config_t, error_feedback), 112);
    assert_eq!(offset_of!(weft_zero_config_t, optimizer), 16);
    assert_eq!(offset_of!(weft_zero_config_t, groups), 56);
    assert_eq!(offset_of!(weft_zero_config_t, grad_op), 80);
    assert_eq!(offset_of!(weft_zero_config_t, growth_interval), 108);
    assert_eq!(size_of::<weft_zero_step_info_t>(), 40);
    assert_eq!(offset_of!(weft_zero_step_info_t, comm_elements), 24);
    assert_eq!(size_of::<weft_zero_memory_t>(), 48);
    assert_eq!(WEFT_ZERO_CONFIG_INIT.struct_size, 120);
    assert_eq!(WEFT_ZERO_CONFIG_INIT.optimizer.kind, WEFT_OPTIMIZER_ADAMW);
    assert_eq!(WEFT_BUCKETER_CONFIG_INIT.op, WEFT_AVG);
}

#[test]
fn pipeline_layouts_match_the_header() {
    // sizeof/offsetof of capi/include/weft/pipeline.h on LP64 (measured with the C compiler).
    use core::mem::{offset_of, size_of};
    assert_eq!(size_of::<weft_action_t>(), 12);
    assert_eq!(size_of::<weft_schedule_config_t>(), 24);
    assert_eq!(size_of::<weft_schedule_info_t>(), 32);
    assert_eq!(offset_of!(weft_schedule_info_t, stages_per_rank), 24);
    assert_eq!(size_of::<weft_timeline_info_t>(), 32);
    assert_eq!(offset_of!(weft_timeline_info_t, makespan), 16);
    assert_eq!(size_of::<weft_rank_stats_t>(), 40);
    assert_eq!(offset_of!(weft_rank_stats_t, peak_activations), 24);
    assert_eq!(offset_of!(weft_rank_stats_t, peak_activation_bytes), 32);
    assert_eq!(size_of::<weft_pipeline_costs_t>(), 112);
    assert_eq!(offset_of!(weft_pipeline_costs_t, cost_model), 104);
    assert_eq!(offset_of!(weft_pipeline_costs_t, microbatch_size), 108);
    assert_eq!(offset_of!(weft_pipeline_costs_t, forward), 16);
    assert_eq!(offset_of!(weft_pipeline_costs_t, latency), 72);
    assert_eq!(offset_of!(weft_pipeline_costs_t, reduce_grad), 96);
    assert_eq!(size_of::<weft_tune_config_t>(), 128);
    assert_eq!(offset_of!(weft_tune_config_t, cost_model), 120);
    assert_eq!(offset_of!(weft_tune_config_t, layer_forward), 16);
    assert_eq!(offset_of!(weft_tune_config_t, global_batch), 32);
    assert_eq!(offset_of!(weft_tune_config_t, microbatch_overhead), 40);
    assert_eq!(offset_of!(weft_tune_config_t, kinds), 96);
    assert_eq!(offset_of!(weft_tune_config_t, nkinds), 104);
    assert_eq!(offset_of!(weft_tune_config_t, max_microbatches), 116);
    assert_eq!(size_of::<weft_tune_candidate_t>(), 48);
    assert_eq!(offset_of!(weft_tune_candidate_t, step_time), 16);
    assert_eq!(offset_of!(weft_tune_candidate_t, fits), 40);
    assert_eq!(size_of::<weft_stage_call_t>(), 32);
    assert_eq!(offset_of!(weft_stage_call_t, input), 16);
    assert_eq!(offset_of!(weft_stage_call_t, output), 24);
    assert_eq!(size_of::<weft_pipeline_config_t>(), 88);
    assert_eq!(offset_of!(weft_pipeline_config_t, user_data), 48);
    assert_eq!(offset_of!(weft_pipeline_config_t, boundaries), 56);
    assert_eq!(offset_of!(weft_pipeline_config_t, record), 80);
    assert_eq!(WEFT_PIPELINE_CONFIG_INIT.struct_size, 88);
    assert_eq!(WEFT_TUNE_CONFIG_INIT.global_batch, 1);
    assert_eq!(WEFT_SCHEDULE_INFO_INIT.kind, WEFT_SCHEDULE_CUSTOM);
}

#[test]
fn moe_layouts_match_the_header() {
    // sizeof/offsetof of capi/include/weft/moe.h on LP64 (measured with the C compiler).
    use core::mem::{offset_of, size_of};
    assert_eq!(size_of::<weft_router_config_t>(), 72);
    assert_eq!(offset_of!(weft_router_config_t, selector), 64);
    assert_eq!(offset_of!(weft_router_config_t, bias), 32);
    assert_eq!(offset_of!(weft_router_config_t, drop), 40);
    assert_eq!(offset_of!(weft_router_config_t, capacity_factor), 48);
    assert_eq!(offset_of!(weft_router_config_t, aux_loss_coeff), 56);
    assert_eq!(offset_of!(weft_router_config_t, z_loss_coeff), 60);
    assert_eq!(size_of::<weft_router_result_t>(), 48);
    assert_eq!(offset_of!(weft_router_result_t, aux_loss), 40);
    assert_eq!(offset_of!(weft_router_result_t, z_loss), 44);
    assert_eq!(size_of::<weft_moe_config_t>(), 56);
    assert_eq!(offset_of!(weft_moe_config_t, dtype), 24);
    assert_eq!(offset_of!(weft_moe_config_t, expert_rank), 32);
    assert_eq!(offset_of!(weft_moe_config_t, expert_alignment), 40);
    assert_eq!(offset_of!(weft_moe_config_t, fp8_dispatch), 48);
    assert_eq!(offset_of!(weft_moe_config_t, device), 52);
    assert_eq!(size_of::<weft_moe_received_t>(), 128);
    assert_eq!(offset_of!(weft_moe_received_t, rows), 56);
    assert_eq!(offset_of!(weft_moe_received_t, local_experts), 64);
    assert_eq!(offset_of!(weft_moe_received_t, experts), 72);
    assert_eq!(offset_of!(weft_moe_received_t, row_source_token), 120);
    assert_eq!(WEFT_ROUTER_CONFIG_INIT.struct_size, 72);
    assert_eq!(WEFT_ROUTER_CONFIG_INIT.topk, 1);
    assert_eq!(WEFT_ROUTER_CONFIG_INIT.capacity_factor, 1.0);
    assert_eq!(WEFT_ROUTER_RESULT_INIT.struct_size, 48);
    assert_eq!(WEFT_MOE_CONFIG_INIT.struct_size, 56);
    assert_eq!(WEFT_MOE_CONFIG_INIT.dtype, WEFT_FLOAT32);
    assert_eq!(WEFT_MOE_RECEIVED_INIT.struct_size, 128);
    assert_eq!(WEFT_MOE_DROPPED, -1);
}

#[test]
fn plugin_layouts_match_the_header() {
    // sizeof/offsetof of capi/include/weft/plugin.h on LP64 (measured with the C compiler).
    use core::mem::{offset_of, size_of};
    assert_eq!(size_of::<weft_plugin_info_t>(), 48);
    assert_eq!(offset_of!(weft_plugin_info_t, abi_major), 32);
    assert_eq!(offset_of!(weft_plugin_info_t, nentries), 40);
    assert_eq!(size_of::<weft_plugin_entry_t>(), 88);
    assert_eq!(offset_of!(weft_plugin_entry_t, ret), 40);
    assert_eq!(offset_of!(weft_plugin_entry_t, args), 48);
    assert_eq!(offset_of!(weft_plugin_entry_t, nargs), 56);
    assert_eq!(offset_of!(weft_plugin_entry_t, dtypes), 64);
    assert_eq!(offset_of!(weft_plugin_entry_t, id), 80);
    assert_eq!(size_of::<weft_value_t>(), 32);
    assert_eq!(offset_of!(weft_value_t, i), 8);
    assert_eq!(offset_of!(weft_value_t, f), 16);
    assert_eq!(offset_of!(weft_value_t, p), 24);
    assert_eq!(size_of::<weft_op_config_t>(), 48);
    assert_eq!(offset_of!(weft_op_config_t, fn_), 16);
    assert_eq!(offset_of!(weft_op_config_t, dtypes), 32);
    assert_eq!(offset_of!(weft_op_config_t, ndtypes), 40);
    assert_eq!(WEFT_PLUGIN_ENTRY_INIT.id, -1);
}

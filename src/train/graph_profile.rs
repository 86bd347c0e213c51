//! What a captured step holds: its CUDA graph's nodes by kind, kernels by name. A replayed
//! step's time is the sum of its nodes' (a few microseconds each for the small kernels of
//! a recurrent step), so the counts say what to fuse next. `MEMCTL_CUDA=graph_profile`
//! prints them when a trial's step is captured.

use std::collections::BTreeMap;
use std::ffi::CStr;

use candle_core::cuda::cudarc::driver::sys;

/// The number of nodes in `graph`.
pub fn node_count(graph: sys::CUgraph) -> usize {
    let mut count = 0usize;
    // SAFETY: with a null node array, cuGraphGetNodes only writes the count.
    match unsafe { sys::cuGraphGetNodes(graph, std::ptr::null_mut(), &mut count) } {
        sys::CUresult::CUDA_SUCCESS => count,
        _ => 0,
    }
}

/// Nodes by label (a kernel's name, or the node's kind), most frequent first.
pub fn histogram(graph: sys::CUgraph) -> Vec<(String, usize)> {
    let mut count = node_count(graph);
    let mut nodes = vec![std::ptr::null_mut(); count];
    // SAFETY: `nodes` holds `count` slots; the driver writes at most that many.
    if unsafe { sys::cuGraphGetNodes(graph, nodes.as_mut_ptr(), &mut count) } != sys::CUresult::CUDA_SUCCESS {
        return vec![];
    }
    let mut by_label: BTreeMap<String, usize> = BTreeMap::new();
    for &node in &nodes[..count] {
        *by_label.entry(label(node)).or_default() += 1;
    }
    let mut sorted: Vec<(String, usize)> = by_label.into_iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    sorted
}

fn label(node: sys::CUgraphNode) -> String {
    let mut kind = sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
    // SAFETY: `node` comes from cuGraphGetNodes on a live graph.
    if unsafe { sys::cuGraphNodeGetType(node, &mut kind) } != sys::CUresult::CUDA_SUCCESS {
        return "(unknown)".into();
    }
    if kind != sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL {
        return format!("({kind:?})").replace("CU_GRAPH_NODE_TYPE_", "").to_lowercase();
    }
    // SAFETY: a kernel node's parameters; the name strings belong to the driver.
    unsafe {
        let mut params: sys::CUDA_KERNEL_NODE_PARAMS = std::mem::zeroed();
        if sys::cuGraphKernelNodeGetParams_v2(node, &mut params) != sys::CUresult::CUDA_SUCCESS {
            return "(kernel)".into();
        }
        let mut name: *const std::ffi::c_char = std::ptr::null();
        let found = if !params.func.is_null() {
            sys::cuFuncGetName(&mut name, params.func)
        } else {
            sys::cuKernelGetName(&mut name, params.kern)
        };
        if found != sys::CUresult::CUDA_SUCCESS || name.is_null() {
            return "(kernel)".into();
        }
        let name = CStr::from_ptr(name).to_string_lossy();
        name.chars().take(60).collect()
    }
}

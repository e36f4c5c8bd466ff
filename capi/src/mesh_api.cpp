// Mesh entry points (weft/mesh.h, "meshes" and "layouts"): argument checks, then core/mesh.
#include <string>
#include <vector>

#include "capi/src/handles.h"
#include "capi/src/mesh_handles.h"
#include "capi/src/shim.h"
#include "capi/src/validate.h"
#include "core/mesh/mesh.h"

using namespace weft;
using namespace weft::capi;

namespace {

weft_comm_t borrowed(const std::shared_ptr<Comm>& c) {
  weft_comm_t h = register_comm(c);
  h->owned_by_mesh = true;
  return h;
}

void check_member(const weft_mesh* m, const char* what) {
  if (!m->mesh->member()) {
    fail(Status::invalid_argument, "mesh: this rank is not a member of the mesh (a descriptor), so it has no %s",
         what);
  }
}

void check_dim(const weft_mesh* m, int dim, const char* arg) {
  if (dim < 0 || dim >= m->mesh->ndims()) {
    fail(Status::invalid_argument, "%s is %d; the mesh has dims 0..%d", arg, dim, m->mesh->ndims() - 1);
  }
}

}  // namespace

extern "C" {

WEFT_API weft_status_t weft_mesh_create(weft_comm_t comm, int ndims, const int* shape, const char* const* dim_names,
                                        const weft_mesh_config_t* config, weft_mesh_t* mesh) {
  return guarded(__func__, [&] {
    check_out(mesh, "mesh");
    *mesh = nullptr;
    weft_comm* h = lookup_comm(comm, "comm");
    if (config && config->struct_size < sizeof(size_t)) {
      fail(Status::invalid_argument, "config->struct_size is %zu; initialise it with WEFT_MESH_CONFIG_INIT",
           config->struct_size);
    }
    if (config && config->struct_size > sizeof(weft_mesh_config_t)) {
      fail(Status::invalid_argument, "config->struct_size is %zu but this library knows %zu bytes (newer header?)",
           config->struct_size, sizeof(weft_mesh_config_t));
    }
    if (ndims < 1 || ndims > WEFT_MESH_MAX_DIMS) {
      fail(Status::invalid_argument, "ndims is %d; a mesh has 1 to %d dims", ndims, WEFT_MESH_MAX_DIMS);
    }
    if (!shape) fail(Status::invalid_argument, "shape is NULL; expected ndims sizes");
    std::vector<int> sh(shape, shape + ndims);
    std::vector<std::string> names;
    if (dim_names) {
      for (int m = 0; m < ndims; ++m) {
        if (!dim_names[m]) fail(Status::invalid_argument, "dim_names[%d] is NULL; dims need a name", m);
        names.emplace_back(dim_names[m]);
      }
    }
    std::vector<int> ranks;
    const bool has_ranks = config && config->struct_size >= offsetof(weft_mesh_config_t, nranks) + sizeof(size_t) &&
                           config->nranks > 0;
    if (has_ranks) {
      if (!config->ranks) fail(Status::invalid_argument, "config->ranks is NULL with config->nranks %zu", config->nranks);
      ranks.assign(config->ranks, config->ranks + config->nranks);
    }
    Comm& parent = *h->comm;
    parent.throw_if_unusable();
    std::shared_ptr<mesh::Mesh> made;
    parent.executor().run_blocking([&] { made = mesh::Mesh::create(h->comm, sh, names, ranks); });
    auto m = std::make_unique<weft_mesh>();
    m->mesh = made;
    m->parent = borrowed(h->comm);
    if (made->member()) {
      for (unsigned mask = 1; mask < (1u << made->ndims()); ++mask) m->groups[mask] = borrowed(made->group(mask));
    }
    *mesh = register_mesh(std::move(m));
  });
}

WEFT_API weft_status_t weft_mesh_destroy(weft_mesh_t mesh) {
  if (!mesh) return WEFT_OK;
  return guarded(__func__, [&] {
    weft_mesh* m = lookup_mesh(mesh, "mesh");
    for (weft_comm_t g : m->groups) {
      if (!g) continue;
      g->comm->executor().shutdown();
      unregister_comm(g);
    }
    unregister_comm(m->parent);  // borrowed: the parent's own handle stays usable
    unregister_mesh(mesh);
  });
}

WEFT_API weft_status_t weft_mesh_shape(weft_mesh_t mesh, int* ndims, int* shape) {
  return guarded(__func__, [&] {
    weft_mesh* m = lookup_mesh(mesh, "mesh");
    if (ndims) *ndims = m->mesh->ndims();
    if (shape) {
      for (int d = 0; d < m->mesh->ndims(); ++d) shape[d] = m->mesh->shape()[static_cast<size_t>(d)];
    }
  });
}

WEFT_API weft_status_t weft_mesh_dim_name(weft_mesh_t mesh, int dim, const char** name) {
  return guarded(__func__, [&] {
    weft_mesh* m = lookup_mesh(mesh, "mesh");
    check_out(name, "name");
    check_dim(m, dim, "dim");
    *name = m->mesh->names()[static_cast<size_t>(dim)].c_str();
  });
}

WEFT_API weft_status_t weft_mesh_dim_index(weft_mesh_t mesh, const char* name, int* dim) {
  return guarded(__func__, [&] {
    weft_mesh* m = lookup_mesh(mesh, "mesh");
    check_out(dim, "dim");
    if (!name) fail(Status::invalid_argument, "name is NULL; expected a dim name");
    const auto& names = m->mesh->names();
    for (size_t d = 0; d < names.size(); ++d) {
      if (names[d] == name) {
        *dim = static_cast<int>(d);
        return;
      }
    }
    std::string all;
    for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
    fail(Status::invalid_argument, "name '%s' is not a dim of the mesh (dims: %s)", name, all.c_str());
  });
}

WEFT_API weft_status_t weft_mesh_is_member(weft_mesh_t mesh, int* member) {
  return guarded(__func__, [&] {
    weft_mesh* m = lookup_mesh(mesh, "mesh");
    check_out(member, "member");
    *member = m->mesh->member() ? 1 : 0;
  });
}

WEFT_API weft_status_t weft_mesh_coords(weft_mesh_t mesh, int* coords, int* mesh_rank) {
  return guarded(__func__, [&] {
    weft_mesh* m = lookup_mesh(mesh, "mesh");
    check_member(m, "coordinates");
    if (coords) {
      for (int d = 0; d < m->mesh->ndims(); ++d) coords[d] = m->mesh->coords()[static_cast<size_t>(d)];
    }
    if (mesh_rank) *mesh_rank = m->mesh->position();
  });
}

WEFT_API weft_status_t weft_mesh_parent_rank(weft_mesh_t mesh, int mesh_rank, int* parent_rank) {
  return guarded(__func__, [&] {
    weft_mesh* m = lookup_mesh(mesh, "mesh");
    check_out(parent_rank, "parent_rank");
    check_rank(mesh_rank, m->mesh->size(), "mesh_rank");
    *parent_rank = m->mesh->parent_rank(mesh_rank);
  });
}

WEFT_API weft_status_t weft_mesh_comm(weft_mesh_t mesh, const int* dims, int ndims, weft_comm_t* comm) {
  return guarded(__func__, [&] {
    weft_mesh* m = lookup_mesh(mesh, "mesh");
    check_out(comm, "comm");
    *comm = nullptr;
    check_member(m, "communicators");
    if (ndims < 1 || ndims > m->mesh->ndims()) {
      fail(Status::invalid_argument, "ndims is %d; expected 1..%d mesh dims", ndims, m->mesh->ndims());
    }
    if (!dims) fail(Status::invalid_argument, "dims is NULL; expected ndims mesh dims");
    unsigned mask = 0;
    for (int i = 0; i < ndims; ++i) {
      check_dim(m, dims[i], ("dims[" + std::to_string(i) + "]").c_str());
      if (i > 0 && dims[i] <= dims[i - 1]) {
        fail(Status::invalid_argument, "dims[%d] is %d after %d; dims must be distinct and increasing", i, dims[i],
             dims[i - 1]);
      }
      mask |= 1u << dims[i];
    }
    *comm = m->groups[mask];
  });
}

WEFT_API weft_status_t weft_mesh_local_shape(weft_mesh_t mesh, const weft_placement_t* placements, int ndim,
                                             const int64_t* global_shape, int mesh_rank, int64_t* local_shape,
                                             int64_t* global_offset) {
  return guarded(__func__, [&] {
    weft_mesh* m = lookup_mesh(mesh, "mesh");
    const shard::Shape global = read_shape(ndim, global_shape, "global_shape");
    const shard::Layout layout = read_layout(placements, m->mesh->ndims(), ndim);
    int pos = mesh_rank;
    if (pos == -1) {
      check_member(m, "local shape of its own (pass a mesh_rank)");
      pos = m->mesh->position();
    }
    check_rank(pos, m->mesh->size(), "mesh_rank");
    const shard::Box b = m->mesh->box_of(pos, global, layout);
    for (int d = 0; d < ndim; ++d) {
      if (local_shape) local_shape[d] = b.shape[static_cast<size_t>(d)];
      if (global_offset) global_offset[d] = b.offset[static_cast<size_t>(d)];
    }
  });
}

}  // extern "C"

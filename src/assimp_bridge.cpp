// mmdkit.importers._assimp: a small nanobind bridge to the system Assimp (Debian's libassimp-dev).
// load(path, data=None, flags=DEFAULT_FLAGS) reads one file (from `data` when given, else from
// `path`, so external files beside it resolve) with the GIL released during the import, and
// returns the scene as plain Python: a dict of lists, numbers and numpy arrays in Assimp's own
// space (right-handed, CCW front faces, file units; matrices row-major with column vectors;
// quaternions x y z w; UV origin top-left through aiProcess_FlipUVs). Nothing is converted to MMD
// here: mmdkit/importers/assimp.py turns the dict into a GltfAsset-shaped scene.
// Errors: Assimp's error string as ValueError (the Python side makes it a FormatError).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <assimp/Importer.hpp>
#include <assimp/config.h>
#include <assimp/importerdesc.h>
#include <assimp/material.h>
#include <assimp/postprocess.h>
#include <assimp/scene.h>
#include <assimp/version.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace nb = nanobind;

// The seed's flags (triangulate, join identical vertices; its third, limit bone weights, is done
// here in weights(): Assimp 5.2's LimitBoneWeights also deletes every bone left without weights,
// whatever AI_CONFIG_IMPORT_REMOVE_EMPTY_BONES says) and what the importer's contract needs on
// top: see DEFAULT_FLAGS in mmdkit/importers/assimp.py for why each.
static const unsigned DEFAULT_FLAGS =
    aiProcess_Triangulate | aiProcess_JoinIdenticalVertices | aiProcess_GenSmoothNormals | aiProcess_SortByPType | aiProcess_FlipUVs | aiProcess_ValidateDataStructure;

template <typename T>
static nb::object array(std::vector<T>&& v, std::initializer_list<size_t> shape) {
    auto* heap = new std::vector<T>(std::move(v));
    nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
    return nb::cast(nb::ndarray<nb::numpy, T>(heap->data(), shape, owner));
}

struct Item {
    const char* key;
    nb::object value;
};

static nb::dict D(std::initializer_list<Item> items) {
    nb::dict d;
    for (const Item& i : items) d[i.key] = i.value;
    return d;
}

static std::string str(const aiString& s) { return std::string(s.C_Str(), s.length); }

static void put_matrix(std::vector<float>& out, const aiMatrix4x4& m) {
    const float* p = &m.a1;  // a1..a4 is the first row: row-major, column vectors
    out.insert(out.end(), p, p + 16);
}

static nb::object vec3s(const aiVector3D* v, unsigned n) {
    if (!v) return nb::none();
    std::vector<float> out(size_t(n) * 3);
    for (unsigned i = 0; i < n; ++i) { out[3 * i] = v[i].x; out[3 * i + 1] = v[i].y; out[3 * i + 2] = v[i].z; }
    return array(std::move(out), {n, 3});
}

// Nodes, parents first (depth-first from the root): names, parent index, local matrix, meshes.
static nb::dict nodes(const aiNode* root) {
    std::vector<const aiNode*> order{root};
    std::vector<int32_t> parent{-1};
    for (size_t i = 0; i < order.size(); ++i)
        for (unsigned c = 0; c < order[i]->mNumChildren; ++c) {
            order.push_back(order[i]->mChildren[c]);
            parent.push_back(int32_t(i));
        }
    size_t n = order.size();
    nb::list names, meshes;
    std::vector<float> local;
    for (const aiNode* node : order) {
        names.append(str(node->mName));
        put_matrix(local, node->mTransformation);
        nb::list m;
        for (unsigned k = 0; k < node->mNumMeshes; ++k) m.append(node->mMeshes[k]);
        meshes.append(m);
    }
    return D({{"name", nb::cast(names)}, {"parent", nb::cast(array(std::move(parent), {n}))},
               {"local", nb::cast(array(std::move(local), {n, 4, 4}))}, {"meshes", nb::cast(meshes)}});
}

// Per vertex its 4 largest bone weights, renormalised (what aiProcess_LimitBoneWeights does with
// AI_LMW_MAX_WEIGHTS 4, without deleting bones); vertices no bone weighs keep index -1 and weight
// 0. Returns how many vertices had more than 4 weights.
static size_t weights(const aiMesh* mesh, std::vector<int32_t>& index, std::vector<float>& weight) {
    size_t v = mesh->mNumVertices, limited = 0;
    index.assign(v * 4, -1);
    weight.assign(v * 4, 0.f);
    std::vector<uint8_t> count(v, 0);
    for (unsigned b = 0; b < mesh->mNumBones; ++b) {
        const aiBone* bone = mesh->mBones[b];
        for (unsigned k = 0; k < bone->mNumWeights; ++k) {
            unsigned vid = bone->mWeights[k].mVertexId;
            float w = bone->mWeights[k].mWeight;
            if (vid >= v || !(w > 0.f)) continue;
            if (count[vid] < 255) ++count[vid];
            int32_t* ix = &index[4 * vid];
            float* wt = &weight[4 * vid];
            int slot = int(std::min_element(wt, wt + 4) - wt);  // replace the smallest
            if (w > wt[slot]) { wt[slot] = w; ix[slot] = int32_t(b); }
        }
    }
    for (size_t i = 0; i < v; ++i) {
        float* wt = &weight[4 * i];
        int32_t* ix = &index[4 * i];
        for (int a = 1; a < 4; ++a)  // largest first
            for (int c = a; c > 0 && wt[c] > wt[c - 1]; --c) { std::swap(wt[c], wt[c - 1]); std::swap(ix[c], ix[c - 1]); }
        float total = wt[0] + wt[1] + wt[2] + wt[3];
        if (total > 0.f)
            for (int a = 0; a < 4; ++a) wt[a] /= total;
        limited += count[i] > 4;
    }
    return limited;
}

static nb::dict mesh(const aiMesh* m) {
    size_t v = m->mNumVertices;
    std::vector<uint32_t> face;
    face.reserve(size_t(m->mNumFaces) * 3);
    for (unsigned f = 0; f < m->mNumFaces; ++f)
        if (m->mFaces[f].mNumIndices == 3) face.insert(face.end(), m->mFaces[f].mIndices, m->mFaces[f].mIndices + 3);
    size_t nf = face.size() / 3;
    nb::object uv = nb::none();
    if (m->mTextureCoords[0]) {
        std::vector<float> t(v * 2);
        for (size_t i = 0; i < v; ++i) { t[2 * i] = m->mTextureCoords[0][i].x; t[2 * i + 1] = m->mTextureCoords[0][i].y; }
        uv = array(std::move(t), {v, 2});
    }
    nb::list bone_name;
    std::vector<float> offset;
    for (unsigned b = 0; b < m->mNumBones; ++b) {
        bone_name.append(str(m->mBones[b]->mName));
        put_matrix(offset, m->mBones[b]->mOffsetMatrix);
    }
    std::vector<int32_t> vb;
    std::vector<float> vw;
    size_t limited = weights(m, vb, vw);
    nb::list target_name, target_weight, target_position, target_normal;
    for (unsigned k = 0; k < m->mNumAnimMeshes; ++k) {
        const aiAnimMesh* a = m->mAnimMeshes[k];
        bool fits = a->mNumVertices == v;
        target_name.append(str(a->mName));
        target_weight.append(a->mWeight);
        target_position.append(fits ? vec3s(a->mVertices, a->mNumVertices) : nb::none());
        target_normal.append(fits ? vec3s(a->mNormals, a->mNumVertices) : nb::none());
    }
    size_t nb_ = m->mNumBones;
    return D({{"name", nb::cast(str(m->mName))}, {"material", nb::cast(m->mMaterialIndex)},
               {"position", nb::cast(vec3s(m->mVertices, unsigned(v)))},
               {"normal", nb::cast(vec3s(m->mNormals, unsigned(v)))}, {"uv", nb::cast(uv)},
               {"face", nb::cast(array(std::move(face), {nf, 3}))}, {"bone_name", nb::cast(bone_name)},
               {"bone_offset", nb::cast(array(std::move(offset), {nb_, 4, 4}))},
               {"vertex_bone", nb::cast(array(std::move(vb), {v, 4}))},
               {"vertex_weight", nb::cast(array(std::move(vw), {v, 4}))}, {"limited", nb::cast(limited)},
               {"target_name", nb::cast(target_name)},
               {"target_weight", nb::cast(target_weight)}, {"target_position", nb::cast(target_position)},
               {"target_normal", nb::cast(target_normal)}});
}

static nb::dict material(const aiMaterial* mat) {
    aiString name, path, alpha_mode;
    mat->Get(AI_MATKEY_NAME, name);
    aiColor4D diffuse(1.f, 1.f, 1.f, 1.f), base(1.f, 1.f, 1.f, 1.f);
    bool has_base = mat->Get(AI_MATKEY_BASE_COLOR, base) == AI_SUCCESS;
    mat->Get(AI_MATKEY_COLOR_DIFFUSE, diffuse);
    float opacity = 1.f;
    mat->Get(AI_MATKEY_OPACITY, opacity);
    int two_sided = 0;
    mat->Get(AI_MATKEY_TWOSIDED, two_sided);
    if (mat->GetTexture(aiTextureType_BASE_COLOR, 0, &path) != AI_SUCCESS)
        if (mat->GetTexture(aiTextureType_DIFFUSE, 0, &path) != AI_SUCCESS) path.Clear();
    mat->Get("$mat.gltf.alphaMode", 0, 0, alpha_mode);
    aiColor4D c = has_base ? base : diffuse;
    return D({{"name", nb::cast(str(name))}, {"color", nb::cast(array(std::vector<float>{c.r, c.g, c.b, c.a},
               {4}))}, {"base_color", nb::cast(has_base)}, {"opacity", nb::cast(opacity)},
               {"two_sided", nb::cast(two_sided != 0)}, {"texture", nb::cast(str(path))},
               {"alpha_mode", nb::cast(str(alpha_mode))}});
}

static nb::dict texture(const aiTexture* t) {
    // mHeight 0: a compressed file (png, jpg...) of mWidth bytes; else mWidth×mHeight BGRA texels
    size_t size = t->mHeight == 0 ? size_t(t->mWidth) : size_t(t->mWidth) * t->mHeight * 4;
    return D({{"hint", nb::cast(std::string(t->achFormatHint, strnlen(t->achFormatHint, HINTMAXTEXTURELEN)))},
               {"width", nb::cast(t->mWidth)}, {"height", nb::cast(t->mHeight)},
               {"filename", nb::cast(str(t->mFilename))},
               {"data", nb::cast(nb::bytes(reinterpret_cast<const char*>(t->pcData), size))}});
}

static nb::dict node_anim(const aiNodeAnim* c, double tps) {
    size_t np = c->mNumPositionKeys, nr = c->mNumRotationKeys, ns = c->mNumScalingKeys;
    std::vector<double> pt(np), rt(nr), st(ns);
    std::vector<float> pv(np * 3), rv(nr * 4), sv(ns * 3);
    for (size_t k = 0; k < np; ++k) {
        pt[k] = c->mPositionKeys[k].mTime / tps;
        const aiVector3D& p = c->mPositionKeys[k].mValue;
        pv[3 * k] = p.x; pv[3 * k + 1] = p.y; pv[3 * k + 2] = p.z;
    }
    for (size_t k = 0; k < nr; ++k) {
        rt[k] = c->mRotationKeys[k].mTime / tps;
        const aiQuaternion& q = c->mRotationKeys[k].mValue;
        rv[4 * k] = q.x; rv[4 * k + 1] = q.y; rv[4 * k + 2] = q.z; rv[4 * k + 3] = q.w;
    }
    for (size_t k = 0; k < ns; ++k) {
        st[k] = c->mScalingKeys[k].mTime / tps;
        const aiVector3D& s = c->mScalingKeys[k].mValue;
        sv[3 * k] = s.x; sv[3 * k + 1] = s.y; sv[3 * k + 2] = s.z;
    }
    return D({{"node", nb::cast(str(c->mNodeName))}, {"translation_time", nb::cast(array(std::move(pt), {np}))},
               {"translation", nb::cast(array(std::move(pv), {np, 3}))},
               {"rotation_time", nb::cast(array(std::move(rt), {nr}))},
               {"rotation", nb::cast(array(std::move(rv), {nr, 4}))},
               {"scale_time", nb::cast(array(std::move(st), {ns}))},
               {"scale", nb::cast(array(std::move(sv), {ns, 3}))}});
}

static nb::dict morph_anim(const aiMeshMorphAnim* c, double tps) {
    size_t nk = c->mNumKeys, width = 0;
    for (size_t k = 0; k < nk; ++k) width = std::max<size_t>(width, c->mKeys[k].mNumValuesAndWeights);
    std::vector<double> time(nk);
    std::vector<int32_t> target(nk * width, -1);
    std::vector<float> weight(nk * width, 0.f);
    for (size_t k = 0; k < nk; ++k) {
        const aiMeshMorphKey& key = c->mKeys[k];
        time[k] = key.mTime / tps;
        for (unsigned j = 0; j < key.mNumValuesAndWeights; ++j) {
            target[k * width + j] = int32_t(key.mValues[j]);
            weight[k * width + j] = float(key.mWeights[j]);
        }
    }
    return D({{"name", nb::cast(str(c->mName))}, {"time", nb::cast(array(std::move(time), {nk}))},
               {"target", nb::cast(array(std::move(target), {nk, width}))},
               {"weight", nb::cast(array(std::move(weight), {nk, width}))}});
}

static nb::dict animation(const aiAnimation* a) {
    double tps = a->mTicksPerSecond > 0 ? a->mTicksPerSecond : 25.0;  // Assimp's documented default
    nb::list channels, morphs;
    for (unsigned c = 0; c < a->mNumChannels; ++c) channels.append(node_anim(a->mChannels[c], tps));
    for (unsigned c = 0; c < a->mNumMorphMeshChannels; ++c) morphs.append(morph_anim(a->mMorphMeshChannels[c], tps));
    return D({{"name", nb::cast(str(a->mName))}, {"duration", nb::cast(a->mDuration / tps)},
               {"channels", nb::cast(channels)}, {"morph_channels", nb::cast(morphs)}});
}

static nb::dict metadata(const aiMetadata* md) {
    nb::dict out;
    for (unsigned i = 0; md && i < md->mNumProperties; ++i) {
        const aiMetadataEntry& e = md->mValues[i];
        std::string key = str(md->mKeys[i]);
        switch (e.mType) {
            case AI_BOOL: out[key.c_str()] = *static_cast<bool*>(e.mData); break;
            case AI_INT32: out[key.c_str()] = *static_cast<int32_t*>(e.mData); break;
            case AI_UINT64: out[key.c_str()] = *static_cast<uint64_t*>(e.mData); break;
            case AI_FLOAT: out[key.c_str()] = *static_cast<float*>(e.mData); break;
            case AI_DOUBLE: out[key.c_str()] = *static_cast<double*>(e.mData); break;
            case AI_AISTRING: out[key.c_str()] = str(*static_cast<aiString*>(e.mData)); break;
            default: break;
        }
    }
    return out;
}

// Bone weights naming a vertex the mesh does not have (malformed_skinweights_oob.x) make Assimp
// 5.2's post-processing (ValidateDataStructure included) crash: refuse them first.
static void check_weights(const aiScene* scene) {
    for (unsigned i = 0; i < scene->mNumMeshes; ++i) {
        const aiMesh* m = scene->mMeshes[i];
        for (unsigned b = 0; b < m->mNumBones; ++b)
            for (unsigned k = 0; k < m->mBones[b]->mNumWeights; ++k)
                if (m->mBones[b]->mWeights[k].mVertexId >= m->mNumVertices)
                    throw nb::value_error(("bone '" + str(m->mBones[b]->mName) + "' weighs vertex " +
                                           std::to_string(m->mBones[b]->mWeights[k].mVertexId) + " of mesh " +
                                           std::to_string(i) + ", which has " + std::to_string(m->mNumVertices) +
                                           " vertices").c_str());
    }
}

static nb::dict load(const std::string& path, nb::object data, unsigned flags) {
    Assimp::Importer importer;
    importer.SetPropertyInteger(AI_CONFIG_PP_SBP_REMOVE, aiPrimitiveType_POINT | aiPrimitiveType_LINE);
    importer.SetPropertyBool(AI_CONFIG_IMPORT_FBX_PRESERVE_PIVOTS, false);
    std::string ext = path.substr(path.find_last_of('.') == std::string::npos ? path.size() : path.find_last_of('.') + 1);
    const aiScene* scene = nullptr;
    if (data.is_none()) {
        nb::gil_scoped_release release;
        scene = importer.ReadFile(path, 0);
    } else {
        nb::bytes b = nb::cast<nb::bytes>(data);
        const char* p = b.c_str();
        size_t n = b.size();
        nb::gil_scoped_release release;
        scene = importer.ReadFileFromMemory(p, n, 0, ext.c_str());
    }
    if (!scene) throw nb::value_error(importer.GetErrorString());
    check_weights(scene);  // before post-processing: Assimp 5.2's steps crash on them
    {
        nb::gil_scoped_release release;
        scene = importer.ApplyPostProcessing(flags);
    }
    if (!scene) throw nb::value_error(importer.GetErrorString());
    if (!scene->mRootNode) throw nb::value_error("the file has no node hierarchy");
    nb::list meshes, materials, textures, animations;
    for (unsigned i = 0; i < scene->mNumMeshes; ++i) meshes.append(mesh(scene->mMeshes[i]));
    for (unsigned i = 0; i < scene->mNumMaterials; ++i) materials.append(material(scene->mMaterials[i]));
    for (unsigned i = 0; i < scene->mNumTextures; ++i) textures.append(texture(scene->mTextures[i]));
    for (unsigned i = 0; i < scene->mNumAnimations; ++i) animations.append(animation(scene->mAnimations[i]));
    const aiImporterDesc* desc = importer.GetImporterInfo(importer.GetImporterIndex(ext.c_str()));
    return D({{"nodes", nb::cast(nodes(scene->mRootNode))}, {"meshes", nb::cast(meshes)},
               {"materials", nb::cast(materials)}, {"textures", nb::cast(textures)},
               {"animations", nb::cast(animations)}, {"metadata", nb::cast(metadata(scene->mMetaData))},
               {"importer", nb::cast(desc ? std::string(desc->mName) : std::string())}});
}

NB_MODULE(_assimp, m) {
    m.doc() = "Assimp bridge: load(path, data=None, flags=DEFAULT_FLAGS) -> scene dict (Assimp space)";
    m.attr("DEFAULT_FLAGS") = DEFAULT_FLAGS;
    m.attr("VERSION") = std::to_string(aiGetVersionMajor()) + "." + std::to_string(aiGetVersionMinor()) + "." +
                        std::to_string(aiGetVersionPatch());
    nb::dict f;
    f["Triangulate"] = unsigned(aiProcess_Triangulate);
    f["JoinIdenticalVertices"] = unsigned(aiProcess_JoinIdenticalVertices);
    f["GenSmoothNormals"] = unsigned(aiProcess_GenSmoothNormals);
    f["SortByPType"] = unsigned(aiProcess_SortByPType);
    f["FlipUVs"] = unsigned(aiProcess_FlipUVs);
    f["ValidateDataStructure"] = unsigned(aiProcess_ValidateDataStructure);
    m.attr("FLAGS") = f;
    m.def("load", &load, nb::arg("path"), nb::arg("data") = nb::none(), nb::arg("flags") = DEFAULT_FLAGS,
          "Read a file (or its bytes, typed by path's extension) into a scene dict; ValueError with "
          "Assimp's message when it cannot.");
}

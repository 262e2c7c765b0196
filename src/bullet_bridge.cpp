// mmdkit.physics._bullet: a small batched nanobind bridge to the system Bullet.
// A World is created from arrays of rigid bodies (R) and 6-DOF spring joints (J); kinematic
// targets go in as one (K,4,4) array, transforms come out as one (R,4,4) float32 array
// (row-major, column vectors: p = M @ [x,y,z,1]).  step() releases the GIL.
// Bones in and out: with the coupling set (set_coupling), set_bones/pull_bones/step_bones take the
// (B,4,4) bone matrices directly, so a frame is one call with the GIL released.
// step_bones_beside: the same for this world and another one holding other bodies of the same
// model, the other stepped on a thread this world keeps (started on first use), so a character
// whose bodies split into two worlds steps them side by side in one call.
// Narrowphase: pairs that cannot touch are skipped (bullet_culling.hpp), with bit-identical results.
// Blow-up guard: after each step a body (dynamic or kinematic) that is non-finite or farther than
// `limit` from its target is put back on its target with zero velocity; a soft body with a
// non-finite node or a node farther than `limit` from the bodies' targets goes back to its rest
// shape (moved with the bodies). Non-finite targets are replaced by the body's bind frame.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/vector.h>

#include <btBulletDynamicsCommon.h>
#include <BulletSoftBody/btSoftRigidDynamicsWorld.h>
#include <BulletSoftBody/btSoftBodyRigidBodyCollisionConfiguration.h>
#include <BulletSoftBody/btSoftBodyHelpers.h>
#include <BulletSoftBody/btSoftBody.h>
#include <BulletCollision/BroadphaseCollision/btAxisSweep3.h>
#include <BulletCollision/CollisionDispatch/btSimulationIslandManager.h>

#include "bullet_culling.hpp"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <stdexcept>
#include <string>
#include <vector>

namespace nb = nanobind;
using namespace nb::literals;

using F1 = nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using F2 = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using F3 = nb::ndarray<const float, nb::ndim<3>, nb::c_contig, nb::device::cpu>;
using I1 = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using I2 = nb::ndarray<const int32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using B1 = nb::ndarray<const bool, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using OutF3 = nb::ndarray<float, nb::ndim<3>, nb::c_contig, nb::device::cpu>;

// out[i][j] = sum_k a[i][k] * b[k][j] for rows i < rows of 4x4 row-major float matrices, products in
// float, summed in double (as the numba kernels it replaces did); columns where skip_col are kept.
static void mat4_mul(const float* a, const float* b, float* out, int rows, int skip_col) {
    for (int i = 0; i < rows; ++i)
        for (int j = 0; j < 4; ++j) {
            if (j == skip_col) continue;
            double s = 0.0;
            for (int k = 0; k < 4; ++k) s += double(a[4 * i + k] * b[4 * k + j]);
            out[4 * i + j] = float(s);
        }
}

static btTransform to_bt(const float* m) {
    btMatrix3x3 r(m[0], m[1], m[2], m[4], m[5], m[6], m[8], m[9], m[10]);
    return btTransform(r, btVector3(m[3], m[7], m[11]));
}

static void from_bt(const btTransform& t, float* m) {
    const btMatrix3x3& r = t.getBasis();
    const btVector3& p = t.getOrigin();
    for (int i = 0; i < 3; ++i) {
        m[4 * i + 0] = float(r[i][0]);
        m[4 * i + 1] = float(r[i][1]);
        m[4 * i + 2] = float(r[i][2]);
        m[4 * i + 3] = float(p[i]);
    }
    m[12] = 0.f; m[13] = 0.f; m[14] = 0.f; m[15] = 1.f;
}

static bool finite(const btTransform& t) {
    const btVector3& p = t.getOrigin();
    const btMatrix3x3& r = t.getBasis();
    return std::isfinite(p.x() + p.y() + p.z() + r[0].x() + r[0].y() + r[0].z() + r[1].x() + r[1].y() +
                         r[1].z() + r[2].x() + r[2].y() + r[2].z());
}

static bool finite(const btVector3& v) { return std::isfinite(v.x() + v.y() + v.z()); }

// A 6-DOF spring joint that can solve its linear limits as Bullet 2.75 (MMD's Bullet) did.
// Bullet 2.76+ without the frame offset takes body A's lever arm for a linear limit row from
// frame B's origin; 2.75 took it from frame A's. With `lever_arm_275` and the frame offset off,
// getInfo2 rewrites those rows' body-A angular Jacobian with frame A's origin (the same change
// as babylon-mmd's constraint patch), everything else is Bullet's.
class MmdSpringJoint : public btGeneric6DofSpringConstraint {
public:
    MmdSpringJoint(btRigidBody& a, btRigidBody& b, const btTransform& fa, const btTransform& fb, bool lever_arm_275)
        : btGeneric6DofSpringConstraint(a, b, fa, fb, true), lever_arm_275_(lever_arm_275) {}

    void getInfo2(btConstraintInfo2* info) override {
        btGeneric6DofSpringConstraint::getInfo2(info);
        if (!lever_arm_275_ || getUseFrameOffset()) return;
        // without the frame offset the linear limit rows come first, one per axis that needs force
        const btTransform& frame_a = getCalculatedTransformA();
        const btVector3 arm = frame_a.getOrigin() - getRigidBodyA().getCenterOfMassTransform().getOrigin();
        int row = 0;
        for (int i = 0; i < 3; ++i) {
            if (!getTranslationalLimitMotor()->needApplyForce(i)) continue;
            const btVector3 torque = arm.cross(frame_a.getBasis().getColumn(i));
            btScalar* j1 = info->m_J1angularAxis + row * info->rowskip;
            j1[0] = torque[0];
            j1[1] = torque[1];
            j1[2] = torque[2];
            ++row;
        }
    }

private:
    bool lever_arm_275_;
};

// Half size of the sweep-and-prune broadphase's box (model units, 400 m in MMD's 8 cm units): its
// 32-bit grid rounds boxes by < 0.001 units here, far below the 0.02 units Bullet pads them with;
// bodies beyond it still collide, they only share the box's edge in the broadphase.
constexpr btScalar BROADPHASE_BOUND = 5e3f;

static void need(bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument(what);
}

// One thread that steps another world for step_bones_beside: started on first use, waits on a
// condition variable between frames, joined when its owner goes. No allocation per frame.
class StepWorker {
public:
    ~StepWorker() {
        if (!thread_.joinable()) return;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        wake_.notify_all();
        thread_.join();
    }

    // Start `fn(arg)` on the worker thread; `wait()` returns its result.
    void start(int (*fn)(void*), void* arg) {
        if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
        {
            std::lock_guard<std::mutex> lock(mutex_);
            fn_ = fn;
            arg_ = arg;
            done_ = false;
        }
        wake_.notify_all();
    }

    int wait() {
        std::unique_lock<std::mutex> lock(mutex_);
        finished_.wait(lock, [this] { return done_; });
        return result_;
    }

private:
    void loop() {
        for (;;) {
            int (*fn)(void*);
            void* arg;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                wake_.wait(lock, [this] { return stop_ || fn_ != nullptr; });
                if (stop_) return;
                fn = fn_;
                arg = arg_;
                fn_ = nullptr;
            }
            const int r = fn(arg);
            {
                std::lock_guard<std::mutex> lock(mutex_);
                result_ = r;
                done_ = true;
            }
            finished_.notify_all();
        }
    }

    std::thread thread_;
    std::mutex mutex_;
    std::condition_variable wake_, finished_;
    int (*fn_)(void*) = nullptr;
    void* arg_ = nullptr;
    int result_ = 0;
    bool done_ = true, stop_ = false;
};

class World {
public:
    World(I1 shape, F2 size, F1 mass, F1 linear_damping, F1 angular_damping, F1 friction,
          F1 restitution, I1 group, I1 mask, B1 kinematic, F3 transform, bool floor,
          F1 gravity, int solver_iterations, bool soft) {
        const size_t n = shape.shape(0);
        need(size.shape(0) == n && size.shape(1) == 3, "size must be (R,3)");
        need(mass.shape(0) == n && linear_damping.shape(0) == n && angular_damping.shape(0) == n &&
             friction.shape(0) == n && restitution.shape(0) == n && group.shape(0) == n &&
             mask.shape(0) == n && kinematic.shape(0) == n, "body arrays must all have length R");
        need(transform.shape(0) == n && transform.shape(1) == 4 && transform.shape(2) == 4,
             "transform must be (R,4,4)");
        need(gravity.shape(0) == 3, "gravity must be (3,)");
        soft_ = soft;
        if (soft) {
            config_ = std::make_unique<btSoftBodyRigidBodyCollisionConfiguration>();
        } else {
            config_ = std::make_unique<btDefaultCollisionConfiguration>();
        }
        dispatcher_ = std::make_unique<CullingDispatcher>(config_.get());
        // Rigid worlds: sweep and prune (its incremental updates beat rebuilding Dbvt leaves for bodies
        // that all move every step; no ray-cast accelerator, nothing casts rays); soft bodies keep Dbvt.
        if (soft) {
            broadphase_ = std::make_unique<btDbvtBroadphase>();
        } else {
            const btVector3 bound(BROADPHASE_BOUND, BROADPHASE_BOUND, BROADPHASE_BOUND);
            broadphase_ = std::make_unique<bt32BitAxisSweep3>(-bound, bound, unsigned(n + 2), nullptr, true);
        }
        solver_ = std::make_unique<btSequentialImpulseConstraintSolver>();
        btVector3 g(gravity(0), gravity(1), gravity(2));
        if (soft) {
            auto* w = new btSoftRigidDynamicsWorld(dispatcher_.get(), broadphase_.get(), solver_.get(), config_.get());
            world_.reset(w);
            sinfo_ = &w->getWorldInfo();
            sinfo_->m_broadphase = broadphase_.get();
            sinfo_->m_dispatcher = dispatcher_.get();
            sinfo_->m_gravity = g;
            sinfo_->air_density = 1.2f;
            sinfo_->water_density = 0;
            sinfo_->water_offset = 0;
            sinfo_->water_normal = btVector3(0, 0, 0);
            sinfo_->m_sparsesdf.Initialize();
        } else {
            world_ = std::make_unique<btDiscreteDynamicsWorld>(dispatcher_.get(), broadphase_.get(), solver_.get(), config_.get());
        }
        world_->setGravity(g);
        world_->getSolverInfo().m_numIterations = solver_iterations;
        // one solver call for all islands: Bullet's per-island split and sort cost more than they save
        // at MMD's size (the order of the rows changes, the rows themselves do not)
        world_->getSimulationIslandManager()->setSplitIslands(false);

        if (floor) {
            // A plane for rigid worlds; a thick box (top at y = 0) where soft bodies live, since
            // soft-rigid contacts go through a signed distance field that needs a convex shape.
            btTransform ft;
            ft.setIdentity();
            if (soft) {
                floor_shape_ = std::make_unique<btBoxShape>(btVector3(1000, 50, 1000));
                ft.setOrigin(btVector3(0, -50, 0));
            } else {
                floor_shape_ = std::make_unique<btStaticPlaneShape>(btVector3(0, 1, 0), 0);
            }
            btRigidBody::btRigidBodyConstructionInfo ci(0, nullptr, floor_shape_.get());
            ci.m_startWorldTransform = ft;
            ci.m_friction = 0.5f;
            floor_body_ = std::make_unique<btRigidBody>(ci);
            world_->addRigidBody(floor_body_.get(), -1, -1);
        }

        shapes_.reserve(n);
        body_shapes_.resize(n);
        bodies_.reserve(n);
        mass_.resize(n);
        inertia_.resize(n);
        group_.resize(n);
        mask_.resize(n);
        kin_.resize(n);
        home_.resize(n);
        bind_.resize(n);
        start_.resize(n);
        pending_.assign(n, 0);
        for (size_t i = 0; i < n; ++i) {
            float sx = std::fmax(size(i, 0), 1e-3f), sy = std::fmax(size(i, 1), 1e-3f),
                  sz = std::fmax(size(i, 2), 1e-3f);
            std::unique_ptr<btCollisionShape> s;
            switch (shape(i)) {
                case 0: s = std::make_unique<btSphereShape>(sx); break;
                case 1: s = std::make_unique<btBoxShape>(btVector3(sx, sy, sz)); break;
                case 2: s = std::make_unique<btCapsuleShape>(sx, sy); break;
                default: throw std::invalid_argument("body " + std::to_string(i) + ": unknown shape " + std::to_string(shape(i)));
            }
            const bool kin = kinematic(i);
            float m = std::isfinite(mass(i)) && mass(i) > 0 ? mass(i) : 1.0f;
            btVector3 inertia(0, 0, 0);
            s->calculateLocalInertia(m, inertia);
            mass_[i] = m;
            inertia_[i] = inertia;
            btTransform t = to_bt(transform.data() + 16 * i);
            if (!finite(t)) t.setIdentity();
            home_[i] = t;
            bind_[i] = t;
            btRigidBody::btRigidBodyConstructionInfo ci(kin ? 0.f : m, nullptr, s.get(), kin ? btVector3(0, 0, 0) : inertia);
            ci.m_startWorldTransform = t;
            ci.m_linearDamping = linear_damping(i);
            ci.m_angularDamping = angular_damping(i);
            ci.m_friction = friction(i);
            ci.m_restitution = restitution(i);
            ci.m_additionalDamping = true;  // as saba does
            auto b = std::make_unique<btRigidBody>(ci);
            BodyShape& bs = body_shapes_[i];
            bs = BodyShape{shape(i) == 1 ? 1 : 0, 0, shape(i) == 2 ? btScalar(0.5f * sy) : btScalar(0), sx,
                           btVector3(sx, sy, sz), s->getContactBreakingThreshold(gContactBreakingThreshold)};
            bs.bound = bounding_radius(bs);
            b->setUserPointer(&body_shapes_[i]);
            if (kin) b->setCollisionFlags(b->getCollisionFlags() | btCollisionObject::CF_KINEMATIC_OBJECT);
            b->setActivationState(DISABLE_DEACTIVATION);
            b->setSleepingThresholds(0.01f, 0.1f * SIMD_RADS_PER_DEG);
            group_[i] = group(i);
            mask_[i] = mask(i);
            kin_[i] = kin;
            world_->addRigidBody(b.get(), group_[i], mask_[i]);
            shapes_.push_back(std::move(s));
            bodies_.push_back(std::move(b));
        }
    }

    ~World() {
        for (auto& c : joints_) world_->removeConstraint(c.get());
        for (auto& s : softs_) static_cast<btSoftRigidDynamicsWorld*>(world_.get())->removeSoftBody(s.get());
        for (auto& b : bodies_) world_->removeRigidBody(b.get());
        if (floor_body_) world_->removeRigidBody(floor_body_.get());
        joints_.clear();
        softs_.clear();
        bodies_.clear();
        world_.reset();
    }

    size_t num_bodies() const { return bodies_.size(); }
    size_t num_joints() const { return joints_.size(); }

    // frames: (J,4,4) joint frame in body A's / body B's local space (world_frame=false),
    // or one world frame used for both (world_frame=true; frame_b ignored).
    void add_joints(I1 body_a, I1 body_b, F3 frame_a, F3 frame_b, F2 linear_lower, F2 linear_upper,
                    F2 angular_lower, F2 angular_upper, F2 stiffness, bool world_frame, bool use_frame_offset,
                    bool all_angular_springs, float stop_erp, bool lever_arm_275) {
        const size_t n = body_a.shape(0);
        need(body_b.shape(0) == n && frame_a.shape(0) == n && linear_lower.shape(0) == n &&
             linear_upper.shape(0) == n && angular_lower.shape(0) == n && angular_upper.shape(0) == n &&
             stiffness.shape(0) == n && stiffness.shape(1) == 6, "joint arrays must all have length J (stiffness (J,6))");
        need(world_frame || frame_b.shape(0) == n, "frame_b must be (J,4,4)");
        const int nb_ = int(bodies_.size());
        for (size_t j = 0; j < n; ++j) {
            int a = body_a(j), b = body_b(j);
            need(a >= 0 && a < nb_ && b >= 0 && b < nb_ && a != b,
                 "joint " + std::to_string(j) + ": bad body pair (" + std::to_string(a) + ", " + std::to_string(b) + ")");
            btRigidBody* A = bodies_[a].get();
            btRigidBody* B = bodies_[b].get();
            btTransform fa, fb;
            if (world_frame) {
                btTransform w = to_bt(frame_a.data() + 16 * j);
                fa = A->getWorldTransform().inverse() * w;
                fb = B->getWorldTransform().inverse() * w;
            } else {
                fa = to_bt(frame_a.data() + 16 * j);
                fb = to_bt(frame_b.data() + 16 * j);
            }
            auto c = std::make_unique<MmdSpringJoint>(*A, *B, fa, fb, lever_arm_275);
            c->setLinearLowerLimit(btVector3(linear_lower(j, 0), linear_lower(j, 1), linear_lower(j, 2)));
            c->setLinearUpperLimit(btVector3(linear_upper(j, 0), linear_upper(j, 1), linear_upper(j, 2)));
            c->setAngularLowerLimit(btVector3(angular_lower(j, 0), angular_lower(j, 1), angular_lower(j, 2)));
            c->setAngularUpperLimit(btVector3(angular_upper(j, 0), angular_upper(j, 1), angular_upper(j, 2)));
            for (int k = 0; k < 6; ++k) {
                float s = stiffness(j, k);
                if (s != 0.f || (all_angular_springs && k >= 3)) {
                    c->enableSpring(k, true);
                    c->setStiffness(k, s);
                }
            }
            c->setEquilibriumPoint();
            c->setUseFrameOffset(use_frame_offset);
            // error reduction at the limits (Bullet's default 0.2); > 0 sets all six axes
            if (stop_erp > 0.f)
                for (int k = 0; k < 6; ++k) c->setParam(BT_CONSTRAINT_STOP_ERP, stop_erp, k);
            world_->addConstraint(c.get());
            joints_.push_back(std::move(c));
        }
    }

    // Move kinematic bodies to their targets; dynamic bodies store them as their reset pose.
    void set_kinematic_transforms(I1 indices, F3 transforms) {
        const size_t n = indices.shape(0);
        need(transforms.shape(0) == n && transforms.shape(1) == 4 && transforms.shape(2) == 4,
             "transforms must be (K,4,4) matching indices");
        const int nb_ = int(bodies_.size());
        for (size_t k = 0; k < n; ++k) {
            int i = indices(k);
            need(i >= 0 && i < nb_, "body index out of range: " + std::to_string(i));
            set_target(size_t(i), transforms.data() + 16 * k);
        }
    }

    // Bone coupling: body r follows bone body_follow[r] (-1: none) at body_offset[r] (R,4,4);
    // entry d drives bone drive_bone[d] from body drive_body[d] through body_offset_inv
    // (drive_mode 2: the bone keeps its translation), while that body is dynamic.
    void set_coupling(I1 body_follow, F3 body_offset, I1 drive_body, I1 drive_bone, I1 drive_mode,
                      F3 body_offset_inv, int num_bones) {
        const size_t n = bodies_.size(), d = drive_body.shape(0);
        need(body_follow.shape(0) == n && body_offset.shape(0) == n && body_offset_inv.shape(0) == n &&
             body_offset.shape(1) == 4 && body_offset.shape(2) == 4 && body_offset_inv.shape(1) == 4 &&
             body_offset_inv.shape(2) == 4, "body_follow (R,), body_offset and body_offset_inv (R,4,4)");
        need(drive_bone.shape(0) == d && drive_mode.shape(0) == d, "drive_body, drive_bone, drive_mode must be (D,)");
        for (size_t r = 0; r < n; ++r)
            need(body_follow(r) >= -1 && body_follow(r) < num_bones, "body_follow out of range");
        for (size_t k = 0; k < d; ++k)
            need(drive_body(k) >= 0 && size_t(drive_body(k)) < n && drive_bone(k) >= 0 && drive_bone(k) < num_bones,
                 "drive_body/drive_bone out of range");
        follow_.assign(body_follow.data(), body_follow.data() + n);
        offset_.assign(body_offset.data(), body_offset.data() + 16 * n);
        offset_inv_.assign(body_offset_inv.data(), body_offset_inv.data() + 16 * n);
        drive_body_.assign(drive_body.data(), drive_body.data() + d);
        drive_bone_.assign(drive_bone.data(), drive_bone.data() + d);
        drive_mode_.assign(drive_mode.data(), drive_mode.data() + d);
        num_bones_ = num_bones;
    }

    // Targets from bone_world (B,4,4): body_target_out (R,4,4) = bone @ offset; kinematic bodies
    // move there over the next step, dynamic ones keep it as their reset pose.
    void set_bones(F3 bone_world, OutF3 body_target_out) {
        check_bones(bone_world.shape(0), bone_world.shape(1), bone_world.shape(2), body_target_out);
        set_bones_raw(bone_world.data(), body_target_out.data());
    }

    // Bodies' transforms into body_world_out (R,4,4); the rows of bones driven by dynamic bodies
    // in bone_world (B,4,4) overwritten (top three rows).
    void pull_bones(OutF3 bone_world, OutF3 body_world_out) {
        check_bones(bone_world.shape(0), bone_world.shape(1), bone_world.shape(2), body_world_out);
        pull_bones_raw(bone_world.data(), body_world_out.data());
    }

    // set_bones, step, pull_bones in one call without the GIL; returns the blow-up resets.
    int step_bones(float dt, int max_substeps, float fixed_step, float limit, OutF3 bone_world,
                   OutF3 body_target_out, OutF3 body_world_out) {
        check_bones(bone_world.shape(0), bone_world.shape(1), bone_world.shape(2), body_target_out);
        need(body_world_out.shape(0) == bodies_.size() && body_world_out.shape(1) == 4 && body_world_out.shape(2) == 4,
             "body_world_out must be (R,4,4)");
        nb::gil_scoped_release release;
        set_bones_raw(bone_world.data(), body_target_out.data());
        const int bad = step_raw(dt, max_substeps, fixed_step, limit);
        pull_bones_raw(bone_world.data(), body_world_out.data());
        return bad;
    }

    // step for this world and `other` (another world of the same model's bodies), `other` on this
    // world's worker thread meanwhile; the blow-up resets of both. Needs the GIL released.
    int step_beside_raw(World& other, float dt, int max_substeps, float fixed_step, float limit) {
        other.beside_ = {dt, max_substeps, fixed_step, limit};
        worker_.start([](void* w) {
            World* o = static_cast<World*>(w);
            return o->step_raw(o->beside_.dt, o->beside_.max_substeps, o->beside_.fixed_step, o->beside_.limit);
        }, &other);
        const int bad = step_raw(dt, max_substeps, fixed_step, limit);
        return bad + worker_.wait();
    }

    int step_beside(World& other, float dt, int max_substeps, float fixed_step, float limit) {
        need(&other != this, "step_beside needs another world");
        nb::gil_scoped_release release;
        return step_beside_raw(other, dt, max_substeps, fixed_step, limit);
    }

    // step_bones for this world and `other` (its own target/body arrays), stepped side by side
    // (step_beside). Both read their targets before either writes a bone (a body may follow a
    // bone that a body of the other world drives).
    int step_bones_beside(World& other, float dt, int max_substeps, float fixed_step, float limit,
                          OutF3 bone_world, OutF3 body_target_out, OutF3 body_world_out,
                          OutF3 other_target_out, OutF3 other_world_out) {
        need(&other != this, "step_bones_beside needs another world");
        const size_t b = bone_world.shape(0), r4 = bone_world.shape(1), c4 = bone_world.shape(2);
        check_bones(b, r4, c4, body_target_out);
        check_bones(b, r4, c4, body_world_out);
        other.check_bones(b, r4, c4, other_target_out);
        other.check_bones(b, r4, c4, other_world_out);
        nb::gil_scoped_release release;
        set_bones_raw(bone_world.data(), body_target_out.data());
        other.set_bones_raw(bone_world.data(), other_target_out.data());
        const int bad = step_beside_raw(other, dt, max_substeps, fixed_step, limit);
        pull_bones_raw(bone_world.data(), body_world_out.data());
        other.pull_bones_raw(bone_world.data(), other_world_out.data());
        return bad;
    }

    // flags (R,) bool: true = kinematic (follows its target), false = dynamic.
    void set_kinematic_flags(B1 flags) {
        need(flags.shape(0) == bodies_.size(), "flags must be (R,)");
        for (size_t i = 0; i < bodies_.size(); ++i) {
            bool k = flags(i);
            if (k == bool(kin_[i])) continue;
            btRigidBody* b = bodies_[i].get();
            world_->removeRigidBody(b);
            if (k) {
                b->setCollisionFlags(b->getCollisionFlags() | btCollisionObject::CF_KINEMATIC_OBJECT);
                b->setMassProps(0, btVector3(0, 0, 0));
                b->setWorldTransform(home_[i]);
                b->setInterpolationWorldTransform(home_[i]);
                pending_[i] = 0;
            } else {
                b->setCollisionFlags(b->getCollisionFlags() & ~btCollisionObject::CF_KINEMATIC_OBJECT);
                b->setMassProps(mass_[i], inertia_[i]);
            }
            b->setLinearVelocity(btVector3(0, 0, 0));
            b->setAngularVelocity(btVector3(0, 0, 0));
            b->updateInertiaTensor();
            b->clearForces();
            world_->addRigidBody(b, group_[i], mask_[i]);
            b->setActivationState(DISABLE_DEACTIVATION);
            kin_[i] = k;
        }
    }

    // Steps; then any body that went non-finite or farther than `limit` from its target is
    // reset to the target with zero velocity, and any soft body with a non-finite node or a
    // node farther than `limit` from the bodies' targets back to its rest shape.  Returns how
    // many rigid and soft bodies were reset.
    // Kinematic bodies move from where they were to their new targets over the substeps
    // (interpolated, so joints see a smooth velocity instead of one teleport per frame).
    int step(float dt, int max_substeps, float fixed_step, float limit) {
        nb::gil_scoped_release release;
        return step_raw(dt, max_substeps, fixed_step, limit);
    }

    void get_transforms_into(OutF3 out) {
        need(out.shape(0) == bodies_.size() && out.shape(1) == 4 && out.shape(2) == 4, "out must be (R,4,4)");
        float* o = out.data();
        for (size_t i = 0; i < bodies_.size(); ++i) from_bt(bodies_[i]->getWorldTransform(), o + 16 * i);
    }

    nb::ndarray<nb::numpy, float, nb::shape<-1, 4, 4>> get_transforms() {
        size_t n = bodies_.size();
        float* data = new float[16 * (n ? n : 1)];
        nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<float*>(p); });
        for (size_t i = 0; i < n; ++i) from_bt(bodies_[i]->getWorldTransform(), data + 16 * i);
        return nb::ndarray<nb::numpy, float, nb::shape<-1, 4, 4>>(data, {n, 4, 4}, owner);
    }

    void reset(F3 transforms) {
        need(transforms.shape(0) == bodies_.size() && transforms.shape(1) == 4 && transforms.shape(2) == 4,
             "transforms must be (R,4,4)");
        for (size_t i = 0; i < bodies_.size(); ++i) {
            btTransform t = to_bt(transforms.data() + 16 * i);
            home_[i] = finite(t) ? t : bind_[i];
            reset_body(i, home_[i]);
            pending_[i] = 0;
        }
        accumulator_ = 0;
        broadphase_->resetPool(dispatcher_.get());
        solver_->reset();
        world_->clearForces();
    }

    // --- soft bodies ---------------------------------------------------------------------
    int add_soft_body(F2 vertices, I2 faces, float mass, float pressure, float linear_stiffness,
                      float damping, float margin, float friction, int iterations, bool bending,
                      int group, int mask) {
        need(soft_, "add_soft_body needs World(..., soft=True)");
        need(vertices.shape(1) == 3 && faces.shape(1) == 3, "vertices (n,3), faces (m,3)");
        const int nv = int(vertices.shape(0));
        std::vector<btScalar> v(3 * nv);
        for (int i = 0; i < 3 * nv; ++i) v[i] = vertices.data()[i];
        std::vector<int> f(faces.shape(0) * 3);
        for (size_t i = 0; i < f.size(); ++i) {
            f[i] = faces.data()[i];
            need(f[i] >= 0 && f[i] < nv, "face index out of range: " + std::to_string(f[i]));
        }
        btSoftBody* sb = btSoftBodyHelpers::CreateFromTriMesh(*sinfo_, v.data(), f.data(), int(faces.shape(0)), true);
        btSoftBody::Material* m = sb->m_materials[0];
        m->m_kLST = linear_stiffness;
        m->m_kAST = linear_stiffness;
        if (bending) sb->generateBendingConstraints(2, m);
        sb->m_cfg.kPR = pressure;
        sb->m_cfg.kDP = damping;
        sb->m_cfg.kDF = friction;
        sb->m_cfg.piterations = iterations;
        sb->m_cfg.collisions = btSoftBody::fCollision::SDF_RS | btSoftBody::fCollision::VF_SS;
        sb->getCollisionShape()->setMargin(margin);
        sb->setTotalMass(mass, true);
        sb->setActivationState(DISABLE_DEACTIVATION);
        static_cast<btSoftRigidDynamicsWorld*>(world_.get())->addSoftBody(sb, group, mask);
        softs_.emplace_back(sb);
        std::vector<btVector3> rest(nv);
        for (int i = 0; i < nv; ++i) rest[i] = sb->m_nodes[i].m_x;
        soft_rest_.push_back(std::move(rest));
        return int(softs_.size()) - 1;
    }

    // PMX 2.1 soft-body settings. config (12): VCF DP DG LF PR VC DF MT CHR KHR SHR AHR;
    // iterations (4): V P D C; material (3): LST AST VST; bending distance 0 = none; clusters 0 = none.
    void configure_soft(int soft, F1 config, I1 iterations, F1 material, int bending_distance, int clusters,
                        float total_mass, float margin, int aero_model) {
        need(soft >= 0 && soft < int(softs_.size()), "soft body index out of range");
        need(config.shape(0) == 12 && iterations.shape(0) == 4 && material.shape(0) == 3,
             "config (12,), iterations (4,), material (3,)");
        btSoftBody* sb = softs_[soft].get();
        btSoftBody::Config& c = sb->m_cfg;
        c.kVCF = config(0); c.kDP = config(1); c.kDG = config(2); c.kLF = config(3);
        c.kPR = config(4); c.kVC = config(5); c.kDF = config(6); c.kMT = config(7);
        c.kCHR = config(8); c.kKHR = config(9); c.kSHR = config(10); c.kAHR = config(11);
        c.viterations = std::max(0, int(iterations(0)));
        c.piterations = std::max(1, int(iterations(1)));
        c.diterations = std::max(0, int(iterations(2)));
        c.citerations = std::max(0, int(iterations(3)));
        if (aero_model >= 0 && aero_model <= 4) c.aeromodel = btSoftBody::eAeroModel::_(aero_model);
        btSoftBody::Material* m = sb->m_materials[0];
        m->m_kLST = material(0); m->m_kAST = material(1); m->m_kVST = material(2);
        if (bending_distance > 0) sb->generateBendingConstraints(bending_distance, m);
        if (clusters > 0) {
            sb->generateClusters(clusters);
            c.collisions = btSoftBody::fCollision::CL_SS | btSoftBody::fCollision::CL_RS;
        }
        sb->setTotalMass(std::max(total_mass, 1e-4f), false);
        sb->getCollisionShape()->setMargin(margin);
    }

    void pin_soft_node(int soft, int node) {
        need(soft >= 0 && soft < int(softs_.size()), "soft body index out of range");
        btSoftBody* sb = softs_[soft].get();
        need(node >= 0 && node < sb->m_nodes.size(), "soft node index out of range");
        sb->setMass(node, 0);
    }

    void anchor_soft_node(int soft, int node, int body, bool disable_collision, float influence) {
        need(soft >= 0 && soft < int(softs_.size()), "soft body index out of range");
        need(body >= 0 && body < int(bodies_.size()), "rigid body index out of range");
        btSoftBody* sb = softs_[soft].get();
        need(node >= 0 && node < sb->m_nodes.size(), "soft node index out of range");
        sb->appendAnchor(node, bodies_[body].get(), disable_collision, influence);
    }

    nb::ndarray<nb::numpy, float, nb::shape<-1, 3>> soft_node_positions(int soft) {
        need(soft >= 0 && soft < int(softs_.size()), "soft body index out of range");
        btSoftBody* sb = softs_[soft].get();
        size_t n = sb->m_nodes.size();
        float* data = new float[3 * (n ? n : 1)];
        nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<float*>(p); });
        for (size_t i = 0; i < n; ++i) {
            const btVector3& x = sb->m_nodes[int(i)].m_x;
            data[3 * i] = float(x.x()); data[3 * i + 1] = float(x.y()); data[3 * i + 2] = float(x.z());
        }
        return nb::ndarray<nb::numpy, float, nb::shape<-1, 3>>(data, {n, 3}, owner);
    }

    void soft_translate(int soft, F1 offset) {
        need(soft >= 0 && soft < int(softs_.size()), "soft body index out of range");
        softs_[soft]->translate(btVector3(offset(0), offset(1), offset(2)));
    }

private:
    void check_bones(size_t b, size_t r4, size_t c4, const OutF3& bodies) const {
        need(!follow_.empty() || bodies_.empty(), "set_coupling first");
        need(b == size_t(num_bones_) && r4 == 4 && c4 == 4, "bone_world must be (B,4,4) with B as given to set_coupling");
        need(bodies.shape(0) == bodies_.size() && bodies.shape(1) == 4 && bodies.shape(2) == 4, "body array must be (R,4,4)");
    }

    void set_target(size_t i, const float* m) {
        btTransform t = to_bt(m);
        home_[i] = finite(t) ? t : bind_[i];
        if (kin_[i]) {
            // Target for the end of the next step(); substeps interpolate towards it.
            if (!pending_[i]) start_[i] = bodies_[i]->getWorldTransform();
            pending_[i] = 1;
        }
    }

    void set_bones_raw(const float* bone_world, float* body_target) {
        for (size_t r = 0; r < bodies_.size(); ++r) {
            float* t = body_target + 16 * r;
            const float* off = offset_.data() + 16 * r;
            if (follow_[r] < 0) std::copy(off, off + 16, t);
            else mat4_mul(bone_world + 16 * size_t(follow_[r]), off, t, 4, -1);
            set_target(r, t);
        }
    }

    void pull_bones_raw(float* bone_world, float* body_world) {
        for (size_t i = 0; i < bodies_.size(); ++i) from_bt(bodies_[i]->getWorldTransform(), body_world + 16 * i);
        for (size_t d = 0; d < drive_body_.size(); ++d) {
            const int r = drive_body_[d];
            if (kin_[r]) continue;
            mat4_mul(body_world + 16 * size_t(r), offset_inv_.data() + 16 * size_t(r), bone_world + 16 * size_t(drive_bone_[d]),
                     3, drive_mode_[d] == 2 ? 3 : -1);
        }
    }

    int step_raw(float dt, int max_substeps, float fixed_step, float limit) {
        if (fixed_step > 0 && max_substeps > 0) {
            accumulator_ += dt;
            int n = int(accumulator_ / fixed_step + 1e-6);
            if (n > max_substeps) {
                n = max_substeps;
                accumulator_ = 0;  // drop the time we cannot catch up with (as Bullet does)
            } else {
                accumulator_ = std::max(0.0, accumulator_ - n * double(fixed_step));
            }
            for (int k = 1; k <= n; ++k) {
                btScalar a = btScalar(k) / btScalar(n);
                for (size_t i = 0; i < bodies_.size(); ++i) {
                    if (!kin_[i] || !pending_[i]) continue;
                    btRigidBody* b = bodies_[i].get();
                    b->setInterpolationWorldTransform(b->getWorldTransform());
                    if (k == n) {
                        b->setWorldTransform(home_[i]);
                        continue;
                    }
                    btTransform t;
                    t.setOrigin(start_[i].getOrigin().lerp(home_[i].getOrigin(), a));
                    t.setRotation(start_[i].getRotation().slerp(home_[i].getRotation(), a));
                    b->setWorldTransform(t);
                }
                world_->stepSimulation(fixed_step, 0, fixed_step);
            }
            if (n > 0) std::fill(pending_.begin(), pending_.end(), 0);
        } else {
            for (size_t i = 0; i < bodies_.size(); ++i)
                if (kin_[i] && pending_[i]) { bodies_[i]->setWorldTransform(home_[i]); pending_[i] = 0; }
            world_->stepSimulation(dt, 0, dt);
        }
        return guard_bodies(limit) + guard_softs(limit);
    }


    // Rigid bodies that are non-finite or farther than `limit` from their target → the target.
    int guard_bodies(float limit) {
        int bad = 0;
        const btScalar limit2 = btScalar(limit) * btScalar(limit);
        for (size_t i = 0; i < bodies_.size(); ++i) {
            const btTransform& t = bodies_[i]->getWorldTransform();
            if (finite(t) && (t.getOrigin() - home_[i].getOrigin()).length2() <= limit2) continue;
            ++bad;
            reset_body(i, home_[i]);
            pending_[i] = 0;
        }
        return bad;
    }

    // How far the bodies' targets moved from their bind frames on average (zero without bodies):
    // where a soft body's rest shape sits now.
    btVector3 targets_shift() const {
        btVector3 s(0, 0, 0);
        if (bodies_.empty()) return s;
        for (size_t i = 0; i < bodies_.size(); ++i) s += home_[i].getOrigin() - bind_[i].getOrigin();
        return s / btScalar(bodies_.size());
    }

    // Soft bodies with a non-finite node, or a node farther than `limit` from where its rest
    // position sits now, → their rest shape (moved with the bodies), at rest.
    int guard_softs(float limit) {
        int bad = 0;
        if (softs_.empty()) return 0;
        const btScalar limit2 = btScalar(limit) * btScalar(limit);
        const btVector3 shift = targets_shift();
        for (size_t k = 0; k < softs_.size(); ++k) {
            btSoftBody* sb = softs_[k].get();
            const std::vector<btVector3>& rest = soft_rest_[k];
            bool ok = true;
            for (int i = 0; i < sb->m_nodes.size() && ok; ++i) {
                const btVector3& x = sb->m_nodes[i].m_x;
                ok = finite(x) && (x - rest[i] - shift).length2() <= limit2;
            }
            if (ok) continue;
            ++bad;
            for (int i = 0; i < sb->m_nodes.size(); ++i) {
                btSoftBody::Node& n = sb->m_nodes[i];
                n.m_x = rest[i] + shift;
                n.m_q = n.m_x;
                n.m_v.setZero();
                n.m_f.setZero();
            }
            sb->updateBounds();
            sb->updateNormals();
        }
        return bad;
    }

    void reset_body(size_t i, const btTransform& t) {
        btRigidBody* b = bodies_[i].get();
        b->setWorldTransform(t);
        b->setInterpolationWorldTransform(t);
        b->setLinearVelocity(btVector3(0, 0, 0));
        b->setAngularVelocity(btVector3(0, 0, 0));
        b->setInterpolationLinearVelocity(btVector3(0, 0, 0));
        b->setInterpolationAngularVelocity(btVector3(0, 0, 0));
        b->clearForces();
    }

    bool soft_ = false;
    std::unique_ptr<btCollisionConfiguration> config_;
    std::unique_ptr<btCollisionDispatcher> dispatcher_;
    std::unique_ptr<btBroadphaseInterface> broadphase_;
    std::unique_ptr<btSequentialImpulseConstraintSolver> solver_;
    std::unique_ptr<btDiscreteDynamicsWorld> world_;
    btSoftBodyWorldInfo* sinfo_ = nullptr;
    std::unique_ptr<btCollisionShape> floor_shape_;
    std::unique_ptr<btRigidBody> floor_body_;
    std::vector<std::unique_ptr<btCollisionShape>> shapes_;
    std::vector<std::unique_ptr<btRigidBody>> bodies_;
    std::vector<std::unique_ptr<btGeneric6DofSpringConstraint>> joints_;
    std::vector<std::unique_ptr<btSoftBody>> softs_;
    std::vector<BodyShape> body_shapes_;  // per body, its user pointer (narrowphase culling)
    std::vector<int> follow_, drive_body_, drive_bone_, drive_mode_;  // bone coupling (set_coupling)
    std::vector<float> offset_, offset_inv_;
    int num_bones_ = 0;
    std::vector<float> mass_;
    std::vector<btVector3> inertia_;
    std::vector<int> group_, mask_;
    std::vector<unsigned char> kin_;
    std::vector<btTransform> home_, bind_, start_;  // target, bind frame, start of a kinematic move
    std::vector<std::vector<btVector3>> soft_rest_;  // per soft body: node positions at creation
    std::vector<unsigned char> pending_;
    double accumulator_ = 0;
    struct StepArgs { float dt; int max_substeps; float fixed_step; float limit; };
    StepArgs beside_{};   // this world's step while another world's worker runs it
    StepWorker worker_;   // steps another world beside this one (step_bones_beside)
};

NB_MODULE(_bullet, m) {
    m.doc() = "Batched Bullet rigid/soft body world for mmdkit (matrices (n,4,4) float32, column vectors).";
    nb::class_<World>(m, "World")
        .def(nb::init<I1, F2, F1, F1, F1, F1, F1, I1, I1, B1, F3, bool, F1, int, bool>(),
             "shape"_a, "size"_a, "mass"_a, "linear_damping"_a, "angular_damping"_a, "friction"_a,
             "restitution"_a, "group"_a, "mask"_a, "kinematic"_a, "transform"_a, "floor"_a,
             "gravity"_a, "solver_iterations"_a = 10, "soft"_a = false)
        .def_prop_ro("num_bodies", &World::num_bodies)
        .def_prop_ro("num_joints", &World::num_joints)
        .def("add_joints", &World::add_joints, "body_a"_a, "body_b"_a, "frame_a"_a, "frame_b"_a,
             "linear_lower"_a, "linear_upper"_a, "angular_lower"_a, "angular_upper"_a, "stiffness"_a,
             "world_frame"_a = false, "use_frame_offset"_a = true, "all_angular_springs"_a = false,
             "stop_erp"_a = 0.0f, "lever_arm_275"_a = false)
        .def("set_kinematic_transforms", &World::set_kinematic_transforms, "indices"_a, "transforms"_a)
        .def("set_kinematic_flags", &World::set_kinematic_flags, "flags"_a)
        .def("step_beside", &World::step_beside, "other"_a, "dt"_a, "max_substeps"_a, "fixed_step"_a, "limit"_a)
        .def("step_bones_beside", &World::step_bones_beside, "other"_a, "dt"_a, "max_substeps"_a, "fixed_step"_a,
             "limit"_a, "bone_world"_a, "body_target_out"_a, "body_world_out"_a, "other_target_out"_a,
             "other_world_out"_a)
        .def("set_coupling", &World::set_coupling, "body_follow"_a, "body_offset"_a, "drive_body"_a, "drive_bone"_a,
             "drive_mode"_a, "body_offset_inv"_a, "num_bones"_a)
        .def("set_bones", &World::set_bones, "bone_world"_a, "body_target_out"_a)
        .def("pull_bones", &World::pull_bones, "bone_world"_a, "body_world_out"_a)
        .def("step_bones", &World::step_bones, "dt"_a, "max_substeps"_a, "fixed_step"_a, "limit"_a, "bone_world"_a,
             "body_target_out"_a, "body_world_out"_a)
        .def("step", &World::step, "dt"_a, "max_substeps"_a = 10, "fixed_step"_a = 1.0f / 120.0f,
             "limit"_a = 1e4f)
        .def("get_transforms", &World::get_transforms)
        .def("get_transforms_into", &World::get_transforms_into, "out"_a)
        .def("reset", &World::reset, "transforms"_a)
        .def("add_soft_body", &World::add_soft_body, "vertices"_a, "faces"_a, "mass"_a = 1.0f,
             "pressure"_a = 0.0f, "linear_stiffness"_a = 1.0f, "damping"_a = 0.0f, "margin"_a = 0.05f,
             "friction"_a = 0.5f, "iterations"_a = 4, "bending"_a = false, "group"_a = -1, "mask"_a = -1)
        .def("anchor_soft_node", &World::anchor_soft_node, "soft"_a, "node"_a, "body"_a,
             "disable_collision"_a = true, "influence"_a = 1.0f)
        .def("configure_soft", &World::configure_soft, "soft"_a, "config"_a, "iterations"_a, "material"_a,
             "bending_distance"_a = 0, "clusters"_a = 0, "total_mass"_a = 1.0f, "margin"_a = 0.05f,
             "aero_model"_a = 0)
        .def("pin_soft_node", &World::pin_soft_node, "soft"_a, "node"_a)
        .def("soft_node_positions", &World::soft_node_positions, "soft"_a)
        .def("soft_translate", &World::soft_translate, "soft"_a, "offset"_a);
}

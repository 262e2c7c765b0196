// Narrowphase culling for mmdkit's Bullet bridge (included by bullet_bridge.cpp).
// Bullet runs the narrowphase on every pair whose broadphase boxes overlap; most such pairs in an
// MMD model (hair strands side by side, a skirt's ring of capsules) touch nowhere. Each rigid body
// points (user pointer) at a BodyShape: a segment with a radius (sphere, capsule along its local y)
// or a box. When a pair's contact manifolds exist and hold no point, and a lower bound on the
// distance between the two shapes is well above the contact-breaking threshold, Bullet's
// narrowphase would add no point either, so the call is skipped. A pair without a manifold yet
// takes Bullet's path, so manifolds are made in Bullet's order: results are bit-identical.
#pragma once

#include <btBulletDynamicsCommon.h>
#include <BulletCollision/BroadphaseCollision/btCollisionAlgorithm.h>
#include <BulletCollision/NarrowPhaseCollision/btPersistentManifold.h>

struct BodyShape {
    int kind;            // 0: segment from -half to +half along local y with a radius, 1: box
    btScalar bound;      // bounding_radius of the shape
    btScalar half;       // segment half length (0 for a sphere)
    btScalar radius;     // segment radius
    btVector3 extent;    // box half extents
    btScalar threshold;  // the shape's contact-breaking threshold
};

// Closest distance between segments p1..q1 and p2..q2.
inline btScalar segment_distance(const btVector3& p1, const btVector3& q1, const btVector3& p2, const btVector3& q2) {
    const btVector3 d1 = q1 - p1, d2 = q2 - p2, r = p1 - p2;
    const btScalar a = d1.dot(d1), e = d2.dot(d2), f = d2.dot(r);
    const btScalar eps = btScalar(1e-12);
    btScalar s = 0, t = 0;
    if (a <= eps && e <= eps) return r.length();
    if (a <= eps) {
        t = btClamped(f / e, btScalar(0), btScalar(1));
    } else {
        const btScalar c = d1.dot(r);
        if (e <= eps) {
            s = btClamped(-c / a, btScalar(0), btScalar(1));
        } else {
            const btScalar b = d1.dot(d2), den = a * e - b * b;
            s = den > eps ? btClamped((b * f - c * e) / den, btScalar(0), btScalar(1)) : btScalar(0);
            t = (b * s + f) / e;
            if (t < 0) {
                t = 0;
                s = btClamped(-c / a, btScalar(0), btScalar(1));
            } else if (t > 1) {
                t = 1;
                s = btClamped((b - c) / a, btScalar(0), btScalar(1));
            }
        }
    }
    return ((p1 + d1 * s) - (p2 + d2 * t)).length();
}

// Lower bound on the gap between a segment with a radius (world end points p, q) and a box:
// the largest separation along the box's axes.
inline btScalar segment_box_gap(const btVector3& p, const btVector3& q, btScalar radius, const btTransform& box,
                                const btVector3& extent) {
    const btVector3 lp = box.invXform(p), lq = box.invXform(q);
    btScalar gap = -BT_LARGE_FLOAT;
    for (int k = 0; k < 3; ++k) {
        const btScalar lo = btMin(lp[k], lq[k]), hi = btMax(lp[k], lq[k]);
        gap = btMax(gap, btMax(lo - extent[k], -extent[k] - hi));
    }
    return gap - radius;
}

// Lower bound on the gap between two boxes: the largest separation along their six face normals.
inline btScalar box_box_gap(const btTransform& ta, const btVector3& ea, const btTransform& tb, const btVector3& eb) {
    const btVector3 d = tb.getOrigin() - ta.getOrigin();
    const btMatrix3x3& ra = ta.getBasis();
    const btMatrix3x3& rb = tb.getBasis();
    btScalar gap = -BT_LARGE_FLOAT;
    for (int k = 0; k < 3; ++k) {
        const btVector3 n = ra.getColumn(k), m = rb.getColumn(k);
        const btScalar pb = eb[0] * btFabs(n.dot(rb.getColumn(0))) + eb[1] * btFabs(n.dot(rb.getColumn(1))) +
                            eb[2] * btFabs(n.dot(rb.getColumn(2)));
        const btScalar pa = ea[0] * btFabs(m.dot(ra.getColumn(0))) + ea[1] * btFabs(m.dot(ra.getColumn(1))) +
                            ea[2] * btFabs(m.dot(ra.getColumn(2)));
        gap = btMax(gap, btMax(btFabs(n.dot(d)) - ea[k] - pb, btFabs(m.dot(d)) - eb[k] - pa));
    }
    return gap;
}

// Radius of a sphere about the body's origin that holds its shape.
inline btScalar bounding_radius(const BodyShape& s) {
    return s.kind == 1 ? s.extent.length() : s.half + s.radius;
}

// Lower bound on the distance between the shapes of two bodies at their current transforms.
inline btScalar shape_gap(const btTransform& ta, const BodyShape& sa, const btTransform& tb, const BodyShape& sb) {
    if (sa.kind == 1 && sb.kind == 1) return box_box_gap(ta, sa.extent, tb, sb.extent);
    if (sa.kind == 1 || sb.kind == 1) {
        const bool a_box = sa.kind == 1;
        const btTransform& ts = a_box ? tb : ta;
        const BodyShape& ss = a_box ? sb : sa;
        const btVector3 axis = ts.getBasis().getColumn(1) * ss.half;
        return segment_box_gap(ts.getOrigin() - axis, ts.getOrigin() + axis, ss.radius, a_box ? ta : tb,
                               a_box ? sa.extent : sb.extent);
    }
    const btVector3 ua = ta.getBasis().getColumn(1) * sa.half, ub = tb.getBasis().getColumn(1) * sb.half;
    return segment_distance(ta.getOrigin() - ua, ta.getOrigin() + ua, tb.getOrigin() - ub, tb.getOrigin() + ub) -
           sa.radius - sb.radius;
}

// A collision dispatcher whose near callback skips pairs that cannot touch (see the top).
class CullingDispatcher : public btCollisionDispatcher {
public:
    explicit CullingDispatcher(btCollisionConfiguration* config) : btCollisionDispatcher(config) {
        setNearCallback(near_callback);
    }

private:
    // True when the pair's algorithm has at least one manifold and none holds a point.
    bool empty_manifolds(btBroadphasePair& pair) {
        if (!pair.m_algorithm) return false;
        scratch_.resize(0);
        pair.m_algorithm->getAllContactManifolds(scratch_);
        if (scratch_.size() == 0) return false;
        for (int i = 0; i < scratch_.size(); ++i)
            if (scratch_[i]->getNumContacts() > 0) return false;
        return true;
    }

    static void near_callback(btBroadphasePair& pair, btCollisionDispatcher& dispatcher, const btDispatcherInfo& info) {
        auto& self = static_cast<CullingDispatcher&>(dispatcher);
        const auto* a = static_cast<const btCollisionObject*>(pair.m_pProxy0->m_clientObject);
        const auto* b = static_cast<const btCollisionObject*>(pair.m_pProxy1->m_clientObject);
        const auto* sa = static_cast<const BodyShape*>(a->getUserPointer());
        const auto* sb = static_cast<const BodyShape*>(b->getUserPointer());
        if (sa && sb) {
            // well above either body's threshold (Bullet uses the smaller): skipping only ever
            // stands in for a narrowphase that finds nothing
            const btScalar limit = btMax(sa->threshold, sb->threshold) * btScalar(1.5) + btScalar(1e-3);
            const btTransform& ta = a->getWorldTransform();
            const btTransform& tb = b->getWorldTransform();
            const btScalar reach = sa->bound + sb->bound + limit;
            const bool apart = (ta.getOrigin() - tb.getOrigin()).length2() > reach * reach ||
                               shape_gap(ta, *sa, tb, *sb) > limit;
            if (apart && self.empty_manifolds(pair)) return;
        }
        btCollisionDispatcher::defaultNearCallback(pair, dispatcher, info);
    }

    btManifoldArray scratch_;  // reused: the per-step path allocates nothing
};

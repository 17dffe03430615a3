#pragma once

// The shape a static expression carries, held where it costs least to copy.
//
// Expressions are values, copied level by level as they are built: `a * x + b * y - c * w`
// copies each leaf and each product into the node above it. With a 72-byte xlite::shape in
// every leaf and node, building that expression took twice as long as evaluating it on 16
// floats (62 against 29 ns on Zen 5; 19 ns with shape_ref): g++ copies a struct it has just
// written in chunks of other widths than the stores, and each such load waits for the stores.
//
// A shape_ref points to a shape outside the expression: a tensor's for a leaf over an
// xlite::tensor, a named leaf's for an operand that is one (`auto x = xlite::adapt(c);` then
// `x * 2`), and that of the operands for every node whose operands all have one shape (the
// common case), so that copying it copies a pointer. Only a shape that nothing outside has (a
// broadcast's, a temporary adapted container's, a deferred or lazy leaf's) is held in the
// shape_ref itself, and copied. The tensor object, or the named leaf, must outlive the
// expression and stay in place, not only its data.

#include <memory>

#include "xlite/core/shape.hpp"

namespace xlite::expr {

class shape_ref {
public:
  // Holds a copy of `s`.
  explicit shape_ref(const xlite::shape& s) noexcept : outside_(nullptr) { std::construct_at(&own_, s); }

  // Refers to `s`, the shape of a tensor or of a named leaf, which outlives every copy of this
  // shape_ref.
  static shape_ref to(const xlite::shape& s) noexcept { return shape_ref(&s); }

  shape_ref(const shape_ref& other) noexcept : outside_(other.outside_) {
    if (outside_ == nullptr) std::construct_at(&own_, other.own_);
  }
  shape_ref& operator=(const shape_ref& other) noexcept {
    outside_ = other.outside_;
    if (outside_ == nullptr) std::construct_at(&own_, other.own_);
    return *this;
  }
  ~shape_ref() = default; // a shape is trivially destructible

  const xlite::shape& get() const noexcept { return outside_ != nullptr ? *outside_ : own_; }
  operator const xlite::shape&() const noexcept { return get(); }

private:
  explicit shape_ref(const xlite::shape* outside) noexcept : outside_(outside) {}

  const xlite::shape* outside_;
  union { // not constructed, and never read, when outside_ is set
    xlite::shape own_;
  };
};

} // namespace xlite::expr

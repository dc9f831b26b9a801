// Host side of the Ozaki II kernels: the tables of a CrtProblem and of a
// ResidueProblem (plain C++: module.cc includes it through ffi/int8.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "params.h"

namespace jaxemu {
namespace int8 {

// The reciprocal that mod_u24 (ffi/int8/modular.cuh) multiplies by.
inline uint32_t mod_magic(int64_t m) { return uint32_t((uint64_t(1) << 32) / uint64_t(m) + 1); }

// The constants of the division-free reductions modulo m (2..256).
inline Modulus modulus_of(int64_t m) {
  return Modulus{int(m), mod_magic(m), int((int64_t(1) << 16) % m), int((int64_t(1) << 31) % m)};
}

// The tables of a CrtProblem from its moduli (pairwise coprime, 2..256);
// "" or why not. W_l = m_0 ... m_{l-1}; wmod[l][j] = W_j mod m_l;
// inverse[l] = (W_l mod m_l)^-1 mod m_l (as jaxemu/_ozaki2.py: garner_digits).
inline std::string setup_crt(const std::vector<int64_t>& moduli, CrtProblem* p) {
  const int n = int(moduli.size());
  if (n < 1 || n > kMaxModuli) return "between 1 and " + std::to_string(kMaxModuli) + " moduli";
  p->nmod = n;
  double w = 1.0;
  for (int l = 0; l < n; ++l) {
    const int64_t ml = moduli[l];
    if (ml < 2 || ml > 256) return "moduli must lie in 2..256";
    const Modulus q = modulus_of(ml);
    p->moduli[l] = q.m;
    p->weight[l] = w;
    p->magic[l] = q.magic;
    p->c16[l] = q.c16;
    p->c31[l] = q.c31;
    p->off20[l] = int(((int64_t(1) << 20) + ml - 1) / ml * ml);
    int64_t wl = 1;  // W_j mod m_l for j = 0..l
    for (int j = 0; j < l; ++j) {
      p->wmod[l][j] = int(wl);
      wl = (wl * moduli[j]) % ml;
    }
    int inv = l ? 0 : 1;
    for (int64_t x = 1; l && x < ml; ++x)
      if ((wl * x) % ml == 1) { inv = int(x); break; }
    if (!inv) return "moduli must be pairwise coprime";
    p->inverse[l] = inv;
    w *= double(ml);
  }
  return "";
}

// The residue epilogue's moduli of a GemmProblem (its batch: moduli x
// entries per modulus); "" or why not.
inline std::string setup_gemm_residues(const std::vector<int64_t>& moduli, GemmProblem* p) {
  const int n = int(moduli.size());
  if (n < 1 || n > kMaxModuli) return "between 1 and " + std::to_string(kMaxModuli) + " moduli";
  if (p->batch % n) return "the batch is not a multiple of the number of moduli";
  p->nmod = n;
  for (int l = 0; l < n; ++l) {
    const int64_t ml = moduli[l];
    if (ml < 2 || ml > 256) return "moduli must lie in 2..256";
    p->moduli[l] = modulus_of(ml);
  }
  return "";
}

// The tables of a ResidueProblem from its moduli (2..256, at most
// kMaxResidueModuli; coprimality is the CRT's concern); "" or why not.
inline std::string setup_residues(const std::vector<int64_t>& moduli, ResidueProblem* p) {
  const int n = int(moduli.size());
  if (n < 1 || n > kMaxResidueModuli) return "between 1 and " + std::to_string(kMaxResidueModuli) + " moduli";
  p->nmod = n;
  for (int l = 0; l < n; ++l) {
    const int64_t ml = moduli[l];
    if (ml < 2 || ml > 256) return "moduli must lie in 2..256";
    const Modulus q = modulus_of(ml);
    p->moduli[l] = q.m;
    p->magic[l] = q.magic;
    p->c16[l] = q.c16;
    p->half[l] = int(ml / 2);
    p->shift30[l] = int(((ml / 2 - (int64_t(1) << 30)) % ml + ml) % ml);
  }
  return "";
}

}  // namespace int8
}  // namespace jaxemu

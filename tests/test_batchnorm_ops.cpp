// Tests of batch_norm and group_norm (autograd/ops_batchnorm.cpp) and their kernels
// (tensor/kernels_norm.h): forward values, the gradients of sum(y ⊙ G) and the updated running
// statistics against PyTorch 1.13 (float64 and float32), the fast kernels against their plain
// references, float32 bit-identity at 1 and 2 threads, the running-statistics update as an in-place
// write (a version bump), second derivatives (gradgradcheck of the rows), and the errors. Gradients
// by finite differences: the batchnorm rows of the gradient-check table. The goldens were generated
// offline by tools/torch_goldens_batchnorm.py (its "ops" table).
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/containers.h"
#include "nn/vision_layers.h"
#include "tensor/kernels_norm.h"
#include "tensor/rng.h"
#include "tensor/threads.h"
#include "tests/kernel_test_helpers.h"
#include "tests/test_helpers.h"

using namespace dg;
using namespace dg::test;

namespace {

// GOLDENS (tools/torch_goldens_batchnorm.py ops, float64 values)
const std::map<std::string, std::vector<double>> kGoldens = {
    {"batch_norm.train.y",
     {-1.822517973119541,   -1.03911354058005,   -0.2557091080405594,  0.5276953244989313,
      -1.262943378448476,   -0.4795389459089853, 2.3785850576706964,   -2.5854185409464088,
      -0.41366696655142543, 1.7580846078435581,  -3.2059189907735473,  -1.0341674163785637,
      1.6220848206483471,   3.2145875366148937,  -0.42541867130864164, 1.1670840446579052,
      2.759586760624452,    -0.8804194472990835, -0.5914538648431983,  0.19195056769629243,
      -1.5986881352511149,  -0.8152837027116242, -0.03187927017213349, -1.822517973119541,
      -1.3444176412921327,  0.8273339331028509,  2.9990855074978344,   -1.9649180911192707,
      0.20683348327571272,  2.3785850576706964,  -1.1079198352943045,  0.4845828806722422,
      2.077085596638789,    -1.5629206112847465, 0.02958210468180031,  1.6220848206483471}},
    {"batch_norm.train.dx",
     {-0.6079830786991082,  -0.1872472477747258,  0.23348858314965665, 0.6542244140740391,
      -0.5632630141741789,  -0.14252718324979652, 0.9950371149018264,  2.3986360937023985,
      -2.365035217741838,   -0.30320158108755524, 1.1003973977130166,  -3.6632739137312202,
      -0.8663885467643563,  0.1628194300458771,   2.295351703528271,   -1.6804488555563566,
      -0.6512408787461232,  1.481291394736271,    1.2362737986294583,  -0.8051185869988443,
      0.43952220130562264,  0.8602580322300051,   -1.1811343533982974, 0.06350643490616956,
      0.031109887064056374, 2.0929435237183394,   -2.6707277877258973, -1.2671288089253252,
      0.7947048277289578,   2.8565384643832408,   -0.7457418636214971, 0.2834661131887363,
      1.3126740899989697,   -1.5598021724134976,  -0.530594195603264,  0.4986137812069695}},
    {"batch_norm.train.dw", {3.217553919358623, -0.8919693966265112, 2.085420223289525}},
    {"batch_norm.train.db", {-2.25, 2.25, -1.5}},
    {"batch_norm.train.running_mean",
     {-0.3354166666666667, 0.20833333333333334, 0.004166666666666667}},
    {"batch_norm.train.running_var", {0.9531013257575758, 1.5416666666666667, 1.1482007575757576}},
    {"batch_norm.train_plain.y",
     {-1.4635754481118939, 0.620761958896175, -1.4635754481118939, 0.6272466206193831,
      -0.7900606749587682, 0.6272466206193831, -0.679517172337665, 1.4672555392091409,
      -0.679517172337665, 1.411304896393612, 0.056432905354197704, 1.411304896393612,
      0.10454110343656385, -1.3543897285007453, 0.10454110343656384}},
    {"batch_norm.train_plain.dx",
     {-0.6226834227622489, -1.016327862986034, -0.0414109634278311, 0.8269059495939844,
      -0.9381567042974125, 0.16709198923559027, 0.8683163417651985, 0.5733236970725275,
      -0.8126188216011294, -0.5569746303840739, 0.6514948557611487, -0.604115868937708,
      -0.51556423821286, 0.7296660144497701, 1.2910536647310782}},
    {"batch_norm.eval.y",
     {-1.4999962500281248,  -0.8437495312535156,  -0.18750281247890643, 0.46874390629570273,
      -1.5118535724614441,  -0.18898169655768052, 1.1338901793460832,   -1.8898169655768051,
      0.5822955725038841,   1.756226564976695,    -0.9270442749611586,  0.24688671751165242,
      -0.09375328122539084, 0.5624934375492183,   -0.9374990625070312,  -0.281252343732422,
      1.3228718759037636,   -1.7008352690191246,  -0.37796339311536103, 0.9449084827884026,
      -0.7593398474650428,  0.4145911450077683,   1.5885221374805794,   -1.0947487024572744}},
    {"batch_norm.eval.dx",
     {-0.9374953125351561,
      -0.3749981250140624,
      0.1874990625070312,
      0.7499962500281248,
      -1.5118535724614441,
      -0.37796339311536103,
      0.7559267862307221,
      1.8898169655768051,
      -1.006226564976695,
      0.0,
      1.006226564976695,
      -1.6770442749611587,
      -0.3749981250140624,
      0.1874990625070312,
      0.7499962500281248,
      -0.7499962500281248,
      -0.37796339311536103,
      0.7559267862307221,
      1.8898169655768051,
      -1.1338901793460832,
      0.0,
      1.006226564976695,
      -1.6770442749611587,
      -0.6708177099844634}},
    {"batch_norm.eval.dw", {2.2499887500843743, -1.2992491638340535, -0.5869654962364056}},
    {"batch_norm.eval.db", {-0.75, 1.25, -2.25}},
    {"group_norm.affine.y",
     {-1.841845992807676,   -1.05795656207396,    -0.2740671313402439, 0.5098222993934721,
      -1.2819249708550218,  -0.49803554012130563, 2.7622770416330944,  -2.0157156790295554,
      0.07465613626035383,  2.1650279515502633,   -2.6129647691123865, -0.5225929538224774,
      1.5447717231636315,   3.062063194657837,    -0.4060315973289187, 1.111259874165287,
      2.628551345659493,    -0.8395434463272632,  -0.2981679832220383, 0.7133596644407655,
      -1.5987035302170718,  -0.5871758825542679,  0.4243517651085358,  -1.8877114295493014,
      -1.2388087492403532,  -0.3833934380697351,  0.47202187310088306, -1.48321312386053,
      -0.6277978126899117,  0.22761749848070645,  -2.6069799959485507, -0.3258724994935689,
      1.955234996961413,    -3.2587249949356885,  -0.9776174984807066, 1.3034899979742753,
      3.2065671443239525,   -0.261527647662804,   1.255763823831402,   2.773055295325608,
      -0.6950394966611486,  0.8222519748330573,   0.8096956308848422,  -1.5023675637729954,
      -0.49083991611019145, 0.5206877315526125,   -1.7913754631052252, -0.7798478154424211}},
    {"group_norm.affine.dx",
     {-0.9633075193739842, -0.38145302201813974, 0.2004014753377047,  0.7822559726935491,
      -0.8036610598695945, -0.22180656251374997, 1.1066092974456334,  3.104186805379477,
      -1.7638566442705133, -0.0621601030093602,  1.9354174049244837,  -2.932626044725507,
      -0.6319977295188435, 1.0252666984190946,   1.5104219461160602,  -1.600943964927791,
      0.05632046301014722, 0.5414757107071129,   1.4762203903144766,  -0.4791139234004557,
      -0.4274705247018347, 0.796282054237759,    -1.1590522594771735, -1.1074088607785526,
      1.0506037965589392,  0.6937486737156164,   -2.351554569949649,  0.8732431178054009,
      0.5163879949620782,  0.15953287211875558,  -0.5261394340490205, 0.33902731620854,
      1.2041940664661004,  -1.518181361536481,   -0.6530146112789204, 0.2121521389786402,
      1.5141913365884898,  -1.8305235416886905,  -0.5839667069415964, 0.6625901278054978,
      2.0865055885101076,  -1.4355679157245884,  -0.1890110809774943, 0.8013925307287708,
      -1.5646493761770062, -0.7516043904282568,  0.2387992212780085,  1.0518442070267582}},
    {"group_norm.affine.dw",
     {5.140445191640916, 2.9043840861820747, -0.0722519748330572, -2.998456955571883}},
    {"group_norm.affine.db", {0.0, -1.0, 0.75, -0.25}},
    {"group_norm.plain.y",
     {-1.1313636091945474, 0.8485227068959105,    -0.8485227068959105, 1.1313636091945474,
      -1.1313636091945474, 0.8485227068959105,    -0.8485227068959105, 1.1313636091945474,
      -1.1313636091945474, 0.8485227068959105,    -0.8485227068959105, 1.1313636091945474,
      0.8219878274736149,  -1.150782958463061,    1.150782958463061,   -0.8219878274736149,
      0.8219878274736149,  -1.150782958463061,    1.150782958463061,   -0.8219878274736149,
      0.8219878274736149,  -1.150782958463061,    1.150782958463061,   -0.8219878274736149,
      1.3482779474926403,  -0.058620780325766966, -1.465519508144174,  0.1758623409773009,
      -1.1313636091945474, 0.8485227068959105,    -0.8485227068959105, 1.1313636091945474,
      -1.1313636091945474, 0.8485227068959105,    -0.8485227068959105, 1.1313636091945474}},
    {"group_norm.plain.dx",
     {-0.6618555312639824, -0.8824577502578678, 0.8824577502578679,   0.6618555312639824,
      -0.6618555312639824, -0.8824577502578679, 0.8824577502578679,   0.6618555312639824,
      -0.8796302825173559, 0.642045155494352,   0.9135798071481506,   -0.6759946801251469,
      -0.9197317751248185, 0.8930703279874106,  0.9153028924545421,   -0.8886414453171343,
      -0.9197317751248185, 0.8930703279874107,  0.915302892454542,    -0.8886414453171344,
      0.8397516990891639,  0.5998413286181788,  -0.5998413286181786,  -0.8397516990891637,
      -0.302970026563213,  0.9613000133803706,  -0.35374428100979227, -0.3045857058073654,
      0.6448726232348638,  0.859839818492377,   -0.859839818492377,   -0.644872623234864,
      0.6759946801251469,  -0.9135798071481507, -0.642045155494352,   0.8796302825173559}},
};
// END GOLDENS

Tensor leaf(const Shape& shape, int mul, int mod, int shift, double div, DType dtype) {
  return Tensor::from_vector(pattern(shape_numel(shape), mul, mod, shift, div), shape, dtype)
      .set_requires_grad(true);
}
Tensor constant(int64_t n, int mul, int mod, int shift, double div, DType dtype) {
  return Tensor::from_vector(pattern(n, mul, mod, shift, div), {n}, dtype);
}

double tolerance_of(DType d) { return d == DType::f64 ? 1e-12 : 3e-6; }

// y's values and each input's gradient of sum(y ⊙ G) against "<name>.y", "<name>.d<n>".
void check_golden(const std::string& name, const Tensor& y, const std::vector<Tensor>& inputs,
                  const std::vector<std::string>& names) {
  CAPTURE(name);
  check_close(y.to_vector(), kGoldens.at(name + ".y"), tolerance_of(y.dtype()));
  backward(y, Tensor::from_vector(pattern(y.numel(), 3, 11, 5, 4.0), y.shape(), y.dtype()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    CAPTURE(names[i]);
    REQUIRE(inputs[i].grad().defined());
    check_close(inputs[i].grad().to_vector(), kGoldens.at(name + ".d" + names[i]),
                tolerance_of(y.dtype()));
  }
}

}  // namespace

TEST_CASE("batch_norm and group_norm match torch 1.13 (forward, gradients, running stats)") {
  for (DType d : {DType::f64, DType::f32}) {
    CAPTURE(dtype_name(d));
    {
      Tensor x = leaf({2, 3, 2, 3}, 7, 23, 11, 8.0, d), w = leaf({3}, 5, 7, -3, 4.0, d),
             b = leaf({3}, 3, 7, 3, 4.0, d);
      Tensor rm = constant(3, 5, 7, 3, 8.0, d), rv = constant(3, 3, 5, -4, 4.0, d);
      const uint64_t mean_version = rm.version(), var_version = rv.version();
      check_golden("batch_norm.train", batch_norm(x, rm, rv, w, b, true, 0.2, 1e-5), {x, w, b},
                   {"x", "w", "b"});
      check_close(rm.to_vector(), kGoldens.at("batch_norm.train.running_mean"), tolerance_of(d));
      check_close(rv.to_vector(), kGoldens.at("batch_norm.train.running_var"), tolerance_of(d));
      CHECK(rm.version() == mean_version + 1);  // the update is an in-place write
      CHECK(rv.version() == var_version + 1);
    }
    {
      Tensor x = leaf({5, 3}, 7, 13, 6, 4.0, d);
      check_golden("batch_norm.train_plain",
                   batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5), {x},
                   {"x"});
    }
    {
      Tensor x = leaf({2, 3, 4}, 7, 23, 11, 8.0, d), w = leaf({3}, 5, 7, -3, 4.0, d),
             b = leaf({3}, 3, 7, 3, 4.0, d);
      Tensor rm = constant(3, 5, 7, 3, 8.0, d), rv = constant(3, 3, 5, -4, 4.0, d);
      check_golden("batch_norm.eval", batch_norm(x, rm, rv, w, b, false, 0.1, 1e-5), {x, w, b},
                   {"x", "w", "b"});
      check_close(rm.to_vector(), pattern(3, 5, 7, 3, 8.0), 0.0);  // eval leaves them alone
    }
    {
      Tensor x = leaf({2, 4, 2, 3}, 7, 23, 11, 8.0, d), w = leaf({4}, 5, 7, -3, 4.0, d),
             b = leaf({4}, 3, 7, 3, 4.0, d);
      check_golden("group_norm.affine", group_norm(x, 2, w, b, 1e-5), {x, w, b}, {"x", "w", "b"});
    }
    {
      Tensor x = leaf({3, 6, 2}, 7, 13, 6, 4.0, d);
      check_golden("group_norm.plain", group_norm(x, 3, Tensor(), Tensor(), 1e-5), {x}, {"x"});
    }
  }
}

TEST_CASE("batch norm and group norm kernels match their plain references") {
  const int64_t N = 3, C = 4, S = 5, G = 2;
  auto run = [&]<class T>() {
    const std::vector<T> x = random_values<T>(N * C * S, 1), w = random_values<T>(C, 2),
                         b = random_values<T>(C, 3), g = random_values<T>(N * C * S, 4);
    auto close = [](const std::vector<T>& a, const std::vector<T>& r) {
      check_close(std::vector<double>(a.begin(), a.end()), std::vector<double>(r.begin(), r.end()),
                  tol<T>());
    };
    std::vector<T> mean(C), var(C), rmean(C), rvar(C);
    batchnorm_stats<T>(mean.data(), var.data(), x.data(), N, C, S);
    ref_batchnorm_stats<T>(rmean.data(), rvar.data(), x.data(), N, C, S);
    close(mean, rmean);
    close(var, rvar);
    std::vector<T> rstd(C);
    for (int64_t c = 0; c < C; ++c) rstd[c] = static_cast<T>(1.0 / std::sqrt(var[c] + 1e-5));
    std::vector<T> out(N * C * S), rout(N * C * S);
    batchnorm_apply<T>(out.data(), x.data(), mean.data(), rstd.data(), w.data(), b.data(), N, C, S);
    ref_batchnorm_apply<T>(rout.data(), x.data(), mean.data(), rstd.data(), w.data(), b.data(), N,
                           C, S);
    close(out, rout);
    batchnorm_apply<T>(out.data(), x.data(), mean.data(), rstd.data(), w.data(), b.data(), N, C, S,
                       /*relu=*/true);
    ref_batchnorm_apply<T>(rout.data(), x.data(), mean.data(), rstd.data(), w.data(), b.data(), N,
                           C, S, /*relu=*/true);
    close(out, rout);
    CHECK(std::count(out.begin(), out.end(), T(0)) > 0);  // the data has values below 0
    for (bool relu : {false, true})
      for (bool batch_stats : {true, false}) {
        CAPTURE(relu);
        std::vector<T> dx(N * C * S, T(0.5)), dw(C, T(0.25)), db(C, T(-1)), rdx = dx, rdw = dw,
                                                                            rdb = db;
        batchnorm_backward<T>(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(),
                              mean.data(), rstd.data(), N, C, S, batch_stats, relu, b.data());
        ref_batchnorm_backward<T>(rdx.data(), rdw.data(), rdb.data(), g.data(), x.data(), w.data(),
                                  mean.data(), rstd.data(), N, C, S, batch_stats, relu, b.data());
        close(dx, rdx);
        close(dw, rdw);
        close(db, rdb);
        // a fresh dx (garbage in it) is written with the bits of adding into zeros
        std::vector<T> zero_dx(N * C * S, T(0)), fresh_dx(N * C * S, T(7)), w1(C), b1(C);
        batchnorm_backward<T>(zero_dx.data(), w1.data(), b1.data(), g.data(), x.data(), w.data(),
                              mean.data(), rstd.data(), N, C, S, batch_stats, relu, b.data());
        batchnorm_backward<T>(fresh_dx.data(), nullptr, nullptr, g.data(), x.data(), w.data(),
                              mean.data(), rstd.data(), N, C, S, batch_stats, relu, b.data(),
                              /*dx_fresh=*/true);
        CHECK(same_bits(fresh_dx, zero_dx));
      }
    std::vector<T> gmean(N * G), grstd(N * G), rgmean(N * G), rgrstd(N * G);
    groupnorm_forward<T>(out.data(), gmean.data(), grstd.data(), x.data(), w.data(), b.data(), N, C,
                         S, G, 1e-5);
    ref_groupnorm_forward<T>(rout.data(), rgmean.data(), rgrstd.data(), x.data(), w.data(),
                             b.data(), N, C, S, G, 1e-5);
    close(out, rout);
    close(gmean, rgmean);
    close(grstd, rgrstd);
    std::vector<T> dx(N * C * S, T(0.5)), dw(C, T(0.25)), db(C, T(-1)), rdx = dx, rdw = dw,
                                                                        rdb = db;
    groupnorm_backward<T>(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(),
                          gmean.data(), grstd.data(), N, C, S, G);
    ref_groupnorm_backward<T>(rdx.data(), rdw.data(), rdb.data(), g.data(), x.data(), w.data(),
                              gmean.data(), grstd.data(), N, C, S, G);
    close(dx, rdx);
    close(dw, rdw);
    close(db, rdb);
  };
  run.operator()<double>();
  run.operator()<float>();
}

TEST_CASE("batch_norm and group_norm: float32 bits do not depend on the thread count") {
  ThreadsGuard guard;
  // 4·8·64·72 elements: above kParallelGrain, so channels, rows and groups run in parallel.
  const Shape xs{4, 8, 64, 72};
  bool group_relu = false;  // batch_norm_relu instead of batch_norm
  auto run = [&](int threads, bool group) {
    set_threads(threads);
    Tensor x =
        Tensor::from_vector(random_values<float>(shape_numel(xs), 5), xs).set_requires_grad(true);
    Tensor w = Tensor::from_vector(random_values<float>(8, 6), {8}).set_requires_grad(true);
    Tensor b = Tensor::from_vector(random_values<float>(8, 7), {8}).set_requires_grad(true);
    Tensor rm = Tensor::zeros({8}), rv = Tensor::ones({8});
    Tensor y = group        ? group_norm(x, 4, w, b, 1e-5)
               : group_relu ? batch_norm_relu(x, rm, rv, w, b, true, 0.1, 1e-5)
                            : batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5);
    backward(y, Tensor::from_vector(random_values<float>(shape_numel(xs), 8), xs));
    std::vector<std::vector<double>> out{y.to_vector(), x.grad().to_vector(), w.grad().to_vector(),
                                         b.grad().to_vector()};
    if (!group) {
      out.push_back(rm.to_vector());
      out.push_back(rv.to_vector());
    }
    return out;
  };
  for (bool group : {false, true}) {
    CAPTURE(group);
    check_same_bits_at_1_and_2_threads([&](int threads) { return run(threads, group); });
  }
  group_relu = true;
  check_same_bits_at_1_and_2_threads([&](int threads) { return run(threads, false); });
}

TEST_CASE("batch_norm_relu: the bits of relu(batch_norm(..)), train and eval, every gradient") {
  const Shape xs{4, 3, 5, 6};
  // x with a NaN (relu keeps it; the backward passes its gradient as relu's does)
  auto run = [&]<class T>(bool fused, bool training, DType dtype) {
    std::vector<T> xv = random_values<T>(shape_numel(xs), 11);
    xv[7] = std::numeric_limits<T>::quiet_NaN();
    Tensor x = Tensor::from_vector(xv, xs).to(dtype).set_requires_grad(true);
    Tensor w = Tensor::from_vector(random_values<T>(3, 12), {3}).to(dtype).set_requires_grad(true);
    Tensor b = Tensor::from_vector(random_values<T>(3, 13), {3}).to(dtype).set_requires_grad(true);
    Tensor rm = Tensor::zeros({3}, dtype), rv = Tensor::ones({3}, dtype);
    Tensor y = fused ? batch_norm_relu(x, rm, rv, w, b, training, 0.1, 1e-5)
                     : plain_batch_norm_relu(x, rm, rv, w, b, training, 0.1, 1e-5);
    backward(y, Tensor::from_vector(random_values<T>(shape_numel(xs), 14), xs).to(dtype));
    return std::vector<std::vector<double>>{y.to_vector(),        x.grad().to_vector(),
                                            w.grad().to_vector(), b.grad().to_vector(),
                                            rm.to_vector(),       rv.to_vector()};
  };
  for (bool training : {true, false}) {
    CAPTURE(training);
    const auto f32 = run.operator()<float>(true, training, DType::f32);
    const auto p32 = run.operator()<float>(false, training, DType::f32);
    const auto f64 = run.operator()<double>(true, training, DType::f64);
    const auto p64 = run.operator()<double>(false, training, DType::f64);
    for (size_t i = 0; i < f32.size(); ++i) {
      CAPTURE(i);  // y, dx, dw, db, running mean, running var
      CHECK(same_bits(f32[i], p32[i]));
      CHECK(same_bits(f64[i], p64[i]));
    }
  }
}

TEST_CASE("Sequential runs BatchNorm + ReLU fused: the same bits; hooks keep them apart") {
  auto make = [] {
    manual_seed(20);  // the same weights each time
    auto net = std::make_unique<Sequential>();
    net->emplace<Conv2d>(2, 4, 3, 1, 1);
    net->emplace<BatchNorm2d>(4);
    net->add(relu);
    net->emplace<MaxPool2d>(2);
    return net;
  };
  const Tensor x = random_tensor({3, 2, 6, 6}, 21, -1, 1, false).to(DType::f32);
  // fused (the Sequential) against the same modules called one by one
  auto run = [&](bool whole, bool hook) {
    std::unique_ptr<Sequential> net = make();
    int hook_calls = 0;
    if (hook)
      (*net)[2].register_forward_hook(
          [&](const Module&, const std::vector<Tensor>&, const Tensor&) -> Tensor {
            ++hook_calls;
            return Tensor();
          });
    Tensor y = x;
    if (whole)
      y = (*net)(x);
    else
      for (size_t i = 0; i < net->size(); ++i) y = (*net)[i](y);
    backward(sum(mul(y, random_tensor(y.shape(), 22, 0.5, 1.5, false).to(DType::f32))));
    std::vector<std::vector<double>> out{y.to_vector()};
    for (const auto& [name, p] : net->named_parameters()) out.push_back(p.grad().to_vector());
    const auto& bn = net->at<BatchNorm2d>(1);
    out.push_back(bn.running_mean.to_vector());
    out.push_back(bn.running_var.to_vector());
    CHECK(hook_calls == (hook ? 1 : 0));
    return out;
  };
  const auto fused = run(true, false), apart = run(false, false), hooked = run(true, true);
  for (size_t i = 0; i < fused.size(); ++i) {
    CAPTURE(i);
    CHECK(same_bits(fused[i], apart[i]));
    CHECK(same_bits(hooked[i], apart[i]));
  }
}

TEST_CASE("batch_norm and group_norm: second derivatives (create_graph) pass gradgradcheck") {
  for (const OpCase& c : batchnorm_op_cases()) {
    CAPTURE(c.name);
    const OpCaseGradgradResult r = run_op_case_gradgrad(c);
    INFO(r.grad.message);
    CHECK(r.supported);
    CHECK(r.grad.passed);
    CHECK(r.grad.checks > 0);
  }
}

TEST_CASE("batch_norm and group_norm: errors name the op, the argument and the shapes") {
  const Tensor x = Tensor::zeros({2, 3, 4});
  auto says = [](const std::function<void()>& fn, std::vector<std::string> parts) {
    const std::string e = error_of(fn);
    CAPTURE(e);
    for (const std::string& p : parts) CHECK(contains(e, p));
  };
  const Tensor none;
  says([&] { batch_norm(Tensor::zeros({3}), none, none, none, none, true); },
       {"batch_norm", "[N, C, *]", "[3]"});
  says([&] { batch_norm(x, none, none, Tensor::ones({4}), none, true); },
       {"batch_norm", "weight of shape [3]", "[4]"});
  says([&] { batch_norm(x, Tensor::zeros({3}), none, none, none, true); },
       {"batch_norm", "together"});
  says([&] { batch_norm(x, none, none, none, none, false); }, {"batch_norm", "eval mode"});
  says(
      [&] {
        batch_norm(Tensor::zeros({1, 3}), none, none, none, none, true);
      },
      {"batch_norm", "more than 1 value per channel", "[1, 3]"});
  says([&] { batch_norm(x, Tensor::zeros({3}, DType::f64), Tensor::ones({3}, DType::f64)); },
       {"batch_norm", "running_mean", "float32"});
  says(
      [&] {
        batch_norm(x, Tensor::zeros({3}).set_requires_grad(true), Tensor::ones({3}), none, none,
                   true);
      },
      {"batch_norm", "do not require grad"});
  says(
      [&] {
        batch_norm(Tensor::zeros({2, 3}, DType::i64), none, none, none, none, true);
      },
      {"batch_norm", "float32 or float64"});
  says([&] { group_norm(x, 2); }, {"group_norm", "num_groups 2", "C = 3", "[2, 3, 4]"});
  says([&] { group_norm(x, 3, none, Tensor::zeros({2})); }, {"group_norm", "bias of shape [3]"});
  says([&] { group_norm(Tensor::zeros({4}), 1); }, {"group_norm", "[N, C, *]"});
}

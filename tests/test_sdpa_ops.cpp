// Tests of scaled_dot_product_attention (autograd/ops_sdpa.cpp, kernels in tensor/kernels_sdpa.h):
// the fast kernels against their double references (masks, causal, cross-attention, broadcast and
// strided inputs, empty rows, the probabilities kept), packed_self_attention against the split
// heads, float32 bit identity at 1 and 2 threads, values and gradients of
// sum(y ⊙ G) against PyTorch 1.13 (boolean mask with an empty row, a differentiated additive mask,
// causal with L > S), second derivatives (create_graph) and the errors. The goldens were generated
// offline by tools/torch_goldens_attention.py (its "sdpa." rows).
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tensor/kernels_sdpa.h"
#include "tensor/threads.h"
#include "tests/kernel_test_helpers.h"
#include "tests/test_helpers.h"

using namespace dg;
using namespace dg::test;

namespace {

// GOLDENS (tools/torch_goldens_attention.py's output, float64 values)
const std::map<std::string, std::vector<double>> kGoldens = {
    {"sdpa.bool.y",
     {-0.5610025729571193, -0.18600257295711936, 0.18899742704288064, -0.125, 0.25, 0.625, 0.0, 0.0,
      0.0, 0.22140633097078954, 0.16058358381786422, -0.16358498303777325, 0.625, -0.625, -0.25,
      0.0, 0.0, 0.0}},
    {"sdpa.bool.dq",
     {-0.026331714147579625,
      -0.02633171414757961,
      -0.036971748344981466,
      0.053594826369263555,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      -0.06186802414225384,
      0.0953104750309128,
      -0.13042521846459315,
      -0.061868024142253834,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0}},
    {"sdpa.bool.dk",
     {-0.10343434655120884,
      -0.03761248965498503,
      0.02820936724123877,
      0.09403122413746258,
      0.0,
      0.0,
      0.0,
      0.0,
      0.1172038025713759,
      0.04261956457140942,
      -0.031964673428557064,
      -0.10654891142852355,
      -0.013769456020167126,
      -0.00500707491642441,
      0.0037553061873183075,
      0.012517687291061024,
      0.0,
      0.0,
      0.0,
      0.0,
      -0.07396635255207842,
      -0.20340746951821567,
      0.09245794069009802,
      -0.03698317627603921,
      0.0,
      0.0,
      0.0,
      0.0,
      -0.032262209092865556,
      -0.08872107500538028,
      0.040327761366081946,
      -0.016131104546432778,
      0.10622856164494397,
      0.29212854452359593,
      -0.13278570205617996,
      0.053114280822471986,
      0.0,
      0.0,
      0.0,
      0.0}},
    {"sdpa.bool.dv",
     {-0.663368636696684,
      -0.2653474546786736,
      0.1326737273393368,
      0.0,
      0.0,
      0.0,
      0.6741642732186274,
      -1.130334290712549,
      -0.18483285464372548,
      -0.2607956365219433,
      -0.10431825460877733,
      0.05215912730438867,
      0.0,
      0.0,
      0.0,
      0.0,
      0.22615785507297098,
      -0.37692975845495164,
      0.0,
      0.0,
      0.0,
      -0.5,
      0.4511489602244271,
      0.6647517329592882,
      0.0,
      0.3226931847026019,
      -0.5378219745043366,
      0.0,
      0.0,
      0.0}},
    {"sdpa.additive.y",
     {-0.16232819773827595, -0.0063380481081449225, -0.09752440312855253, -0.21007059702460087,
      0.12364246038854315,  0.24053944495540597,    -0.08561001228620002, -0.24661386177461905,
      0.006142468830108105, -0.07013693231107432,   0.19202496797320437,  -0.19629156274013704,
      0.08029676242261695,  0.10565965830802618,    0.33156937939611997,  0.2043567263931451,
      -0.23938675496487932, -0.007555049798200791,  0.04132445446291726,  0.2768524213017223,
      -0.13949804554541703, -0.055299303043528134,  0.20130062470919766,  -0.24763829122251685,
      0.44845857791142024,  -0.1710908910199283,    -0.2184353792390091,  -0.42136726722315915,
      -0.23358673025302668, 0.14141326974697327,    -0.13756840252588043, 0.1058326481717742,
      0.4808326481717742,   -0.15462890948711694,   0.15163356382385387,  0.5266335638238538}},
    {"sdpa.additive.dq",
     {-0.002667194226867755,  0.05000326999298482,   -0.09671584878997178,  0.14831446176792087,
      0.007353935201224154,   -0.025480959242101336, -0.024722072564693512, 0.010476732325629694,
      -0.009068462073589021,  0.0033378149684250543, 0.0541678959157205,    -0.07310841698783437,
      -0.0030519707946982527, 0.04650292310523759,   -0.14171202633043192,  -0.11353272970887814,
      0.1280999343200634,     -0.08782001229489222,  -0.026337527417244974, 0.1395433906895958,
      0.05272486160766274,    0.01861440091610056,   -0.07314686956616567,  0.09378242487727019,
      0.05560136382298829,    -0.03807738689907711,  -0.04605247829137092,  0.05560136382298828,
      0.019842055266879637,   -0.03589162933963474,  0.008650468981752025,  0.019842055266879634,
      0.0540187628409038,     0.028141348308291826,  -0.011992481826790916, 0.05401876284090382,
      0.051513777591338177,   0.040642407419135294,  -0.010889038372321806, -0.045663017279462495,
      0.022069236021309207,   0.012298443502684801,  0.009053643128375574,  -0.0453934690457122,
      0.03208536650120993,    -0.027430868460556798, 0.000640504827086762,  0.01343305482429541}},
    {"sdpa.additive.dk",
     {-0.19005824044410152,   -0.11588747721649661, 0.1315678698967134,    0.1972887114935739,
      0.29345858280388454,    0.19080334728017556,  -0.19279073654854664,  -0.34142705386014455,
      0.033511997499080626,   0.01020610151542169,  -0.07655567519637244,  0.04136333560520272,
      -0.1833561065412683,    -0.10501362911682435, 0.11086906734147789,   0.19126500283420175,
      0.04644376668240464,    0.019891657537723678, 0.026909474506727905,  -0.08848999607283382,
      0.1691842114953879,     -0.24997228006907155, 0.049214914465587095,  0.12201350245854511,
      -0.08334705855969354,   -0.1620597257861083,  0.08914018951987492,   -0.06970476696556649,
      -0.012150799936101131,  0.13941797091737235,  -0.08161764577757767,  0.07278790810432959,
      0.11220461388838752,    0.4812033968734275,   -0.20808319423636085,  0.05981290814111075,
      -0.18589096688798087,   -0.20858936193562003, 0.15134573602847656,   -0.18490955173841905,
      -0.14654848905068035,   0.2912786877390341,   0.09363761686461841,   -0.14954097602905234,
      0.12728768539349503,    -0.23620438377524686, -0.04501575959747689,  0.08903550181629248,
      0.014229289029779811,   -0.03256501750120668, -0.0350318578050968,   0.03776830735968441,
      -0.014305016774939706,  0.06381422103683596,  -0.05072955359013697,  0.004239887969786641,
      0.01933653140234522,    -0.08632350749941647, 0.03713955412809225,   0.0184972788832888,
      0.0706205938424883,     -0.04682518769358861, 0.051124894160842094,  0.06433709434175351,
      -0.007981523018785028,  0.028614626346802275, -0.06641650548290089,  -0.026842322466454214,
      -0.065811904088921,     0.046190872466991856, -0.05428436432525782,  -0.022684419003100628,
      -0.0039567090368612815, -0.02935668386473122, 0.08028408708516245,   -0.01008847008503473,
      0.007129542302078968,   0.001376372744525737, -0.010708111437845882, -0.00472188278716403}},
    {"sdpa.additive.dv",
     {0.041974317320219404, -0.10984771781752053,  -0.13420453108073005,  -0.162158826858299,
      -0.2082409884303077,  -0.024407333630545848, 0.4981899073156236,    -0.273945821798495,
      -0.274850333354313,   -0.14986789277368495,  0.022518870145564113,  -0.09649339567560428,
      0.021862494996141124, 0.31951565790075886,   -0.22004440625880675,  -0.3827800764197428,
      0.1591011442594209,   0.5257505697596452,    -0.11959167887261934,  0.1483602899864231,
      -0.09711565697660281, -0.611422789794043,    -0.020091088937887636, 0.38028382778396996,
      -0.133977498024169,   0.3532110117259399,    -0.45136691511575994,  -0.25222795688942595,
      0.10941864296610387,  -0.10755182545125265,  0.3149399771506379,    0.45658175615468277,
      -0.6484612338799911,  0.6376763102407055,    -0.33956438184179283,  -0.34149589950353926,
      0.46272053464638585,  -0.3184071611905576,   -0.07640420052838631,  0.4183527850876039,
      -0.3990410522989455,  -0.2617105987085838,   0.4163103928746671,    -0.39956916082338684,
      -0.17192806737949956, -0.8211281533075062,   -0.26135418960404644,  0.2984197740994134,
      -0.40985450167989534, 0.2713102153919348,    0.9524749324637649,    -0.14241599144339218,
      0.036455980412565675, 0.21532795226852353,   -0.6481770164343669,   -0.07580712251015494,
      0.496562771414057,    -0.228424337134839,    0.029395116309700983,  0.287214569754241}},
    {"sdpa.additive.dmask",
     {0.13637211710232305,  -0.47859062849289213, -0.037295578019546756, 0.6308880673685165,
      -0.2513739779584009,  0.294511252086536,    0.038233902327880244,  -0.2932070339280572,
      -0.0932577743790565,  0.0537196538926974,   -0.04024133676999416,  0.19480038967006702,
      -0.19291187642001467, -0.11034303169980683, 0.14869585521974862,   0.19532438613993608,
      0.01453318251314007,  -0.20776929375191627, -0.036280978718006895, 0.034192703816847025,
      0.10777382527720646,  -0.01533782191660403, -0.1304178220985364,   0.0802337037809863,
      -0.04225188504305223, -0.25009257439367527, 0.327164542402731,     -0.042764332239404346,
      -0.11488497475756748, 0.08057733898791615}},
    {"sdpa.causal.y",
     {-0.75,
      -0.375,
      0.0,
      0.375,
      0.17401839321524887,
      -0.4520015327679374,
      -0.0770015327679374,
      0.2979984672320626,
      0.22919835633888982,
      -0.5004718064206053,
      -0.12547180642060535,
      0.24952819357939462,
      0.23072175674571538,
      -0.5063142043416542,
      -0.13131420434165422,
      0.24368579565834578,
      0.10446647421259575,
      -0.48866983533750924,
      -0.11366983533750935,
      0.2613301646624906,
      0.5,
      -0.75,
      -0.375,
      0.0,
      0.44261548402367085,
      -0.06138580828404977,
      -0.4323845159763292,
      -0.057384515976329195,
      0.3986776022590313,
      0.026805049347426557,
      -0.47632239774096863,
      -0.10132239774096868,
      0.35337414655032917,
      0.38162049649832847,
      -0.5216258534496708,
      -0.14662585344967086,
      0.3468435062619604,
      0.38167974257834314,
      -0.5281564937380396,
      -0.15315649373803958}},
    {"sdpa.causal.dq",
     {0.0,
      0.0,
      0.0,
      0.0,
      -0.037421549917226904,
      -0.037421549917226925,
      -0.037421549917226946,
      0.17463389961372566,
      -0.02728775488380976,
      -0.027287754883809766,
      -0.027287754883809773,
      0.08696735835433259,
      -0.023269655592963033,
      -0.02326965559296302,
      -0.023269655592963005,
      0.06446909764688818,
      -0.020236432505943164,
      -0.02023643250594317,
      -0.02023643250594318,
      0.050046336627266666,
      0.0,
      0.0,
      0.0,
      0.0,
      0.037830797776234784,
      -0.17654372295576237,
      0.03783079777623482,
      0.0378307977762348,
      0.06281328206713509,
      -0.18046217505314077,
      0.06281328206713509,
      0.06281328206713509,
      -0.04265691912651339,
      0.12600709238647229,
      -0.042656919126513385,
      -0.042656919126513385,
      -0.04081153908520797,
      0.10632977124878748,
      -0.04081153908520797,
      -0.04081153908520797}},
    {"sdpa.causal.dk",
     {-0.04742210297241935, 0.16126270949008248,   0.013552787960816597, -0.1613825935941031,
      0.11043717963695157,  -0.11221924351278059,  -0.08700786089836482, 0.19407097034706194,
      -0.06301507666453221, -0.049043465977301866, 0.07345507293754816,  -0.03268837675295879,
      0.38173660100700907,  -0.5896086924656508,   -0.04814717226220371, 0.4151118141847248,
      -0.23455429952457,    0.34813369389332915,   0.14819474423481296,  -0.27840389703780344,
      -0.14718230148243905, 0.2414749985723217,    -0.10004757197260933, -0.13670791714692132}},
    {"sdpa.causal.dv",
     {-2.1330310117021423, -0.3149674852622144,  1.5030960411777134,  0.4608929164432826,
      -1.1124983878869483, 0.06663028602695768,  1.2457589599408636,  -0.20455044960159618,
      -0.5044706004109092, 0.24833719923525666,  1.0011449988814225,  -1.0063424668416865,
      0.734409600464831,   1.3893760967376054,   -2.294660598731279,  -0.4772184792136131,
      0.9061151055514634,  -0.05954181429450556, -0.9508518870062335, 0.16332830852838462,
      0.8594752939837058,  -0.5798342824430998,  -0.5044875142624874, 0.3138901706852285}},
};
// END GOLDENS

Tensor leaf(const Shape& shape, int mul, int mod, int shift, double div, DType dtype) {
  return Tensor::from_vector(pattern(shape_numel(shape), mul, mod, shift, div), shape, dtype)
      .set_requires_grad(true);
}

void check_golden(const std::string& name, const Tensor& y, const std::vector<Tensor>& inputs,
                  const std::vector<std::string>& names) {
  const double tolerance = y.dtype() == DType::f64 ? 1e-12 : 5e-6;
  CAPTURE(name);
  check_close(y.to_vector(), kGoldens.at(name + ".y"), tolerance);
  backward(y, Tensor::from_vector(pattern(y.numel(), 3, 11, 5, 4.0), y.shape(), y.dtype()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    CAPTURE(names[i]);
    REQUIRE(inputs[i].grad().defined());
    check_close(inputs[i].grad().to_vector(), kGoldens.at(name + ".d" + names[i]), tolerance);
  }
}

// The bool mask of the goldens, [3, 5] (True = the key takes part): row 1 keeps one key, row 2
// none.
Tensor keep_mask() {
  return Tensor::from_vector(std::vector<bool>{1, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0},
                             {3, 5});
}

// Kernel inputs of every kind the op passes: q as a permuted view, k broadcast over the heads, an
// additive mask broadcast over batch and heads with an empty row; causal instead when asked.
SdpaInputs kernel_case(DType dt, int64_t L, int64_t S, bool causal, uint64_t seed) {
  const int64_t B = 2, H = 3, E = 8, Ev = 5;
  const Tensor q = dg::raw::view_permute(random_tensor({B, L, H, E}, seed, -1.5, 1.5, false).to(dt),
                                         {0, 2, 1, 3});
  const Tensor k = random_tensor({B, 1, S, E}, seed + 1, -1.5, 1.5, false).to(dt);
  const Tensor v = random_tensor({B, H, S, Ev}, seed + 2, -1.5, 1.5, false).to(dt);
  Tensor mask;
  if (!causal) {
    std::vector<double> m = random_tensor({L, S}, seed + 3, -2, 2, false).to_vector();
    for (int64_t j = 0; j < S; ++j) m[j] = -INFINITY;  // row 0: no key
    m[S + 1] = -INFINITY;                              // row 1: one key hidden
    mask = dg::raw::view_expand(Tensor::from_vector(m, {L, S}, dt), {B, H, L, S});
  }
  return {q, dg::raw::view_expand(k, {B, H, S, E}), v, mask, causal, 0.4};
}

}  // namespace

TEST_CASE("sdpa kernels match their references (masks, causal, cross, strided, empty rows)") {
  for (DType dt : {DType::f64, DType::f32}) {
    const double tolerance = dt == DType::f64 ? 1e-12 : 2e-5;
    struct Case {
      int64_t L, S;
      bool causal;
    };
    for (const Case& c :
         {Case{7, 9, false}, Case{70, 90, false}, Case{9, 5, true}, Case{130, 70, true}}) {
      const int64_t L = c.L, S = c.S;
      const bool causal = c.causal;
      CAPTURE(L);
      CAPTURE(S);
      CAPTURE(causal);
      const SdpaInputs in = kernel_case(dt, L, S, causal, 7);
      const int64_t Bt = 6;
      Tensor out = Tensor::empty({Bt, L, 5}, dt), lse = Tensor::empty({Bt, L}, dt);
      sdpa_forward(in, out, lse);
      check_close(out.to_vector(), ref_sdpa_forward(in).to_vector(), tolerance);
      const Tensor dout = random_tensor({Bt, L, 5}, 11, -1, 1, false).to(dt);
      Tensor dq = Tensor::empty({Bt, L, 8}, dt), dk = Tensor::empty({Bt, S, 8}, dt);
      Tensor dv = Tensor::empty({Bt, S, 5}, dt), dm = Tensor::empty({Bt, L, S}, dt);
      sdpa_backward(in, out, lse, dout, &dq, &dk, &dv, &dm);
      Tensor rq, rk, rv, rm;
      ref_sdpa_backward(in, dout, rq, rk, rv, rm);
      check_close(dq.to_vector(), rq.to_vector(), tolerance);
      check_close(dk.to_vector(), rk.to_vector(), tolerance);
      check_close(dv.to_vector(), rv.to_vector(), tolerance);
      check_close(dm.to_vector(), rm.to_vector(), tolerance);
      // the probabilities kept by the forward and read by the backward: the same values
      Tensor probs = Tensor::empty({Bt, L, S}, dt);
      sdpa_forward(in, out, lse, &probs);
      check_close(out.to_vector(), ref_sdpa_forward(in).to_vector(), tolerance);
      sdpa_backward(in, out, lse, dout, &dq, &dk, &dv, &dm, &probs);
      check_close(dq.to_vector(), rq.to_vector(), tolerance);
      check_close(dk.to_vector(), rk.to_vector(), tolerance);
      check_close(dv.to_vector(), rv.to_vector(), tolerance);
      check_close(dm.to_vector(), rm.to_vector(), tolerance);
    }
  }
}

TEST_CASE("scaled_dot_product_attention: float32 bits are the same at 1 and 2 threads") {
  ThreadsGuard guard;
  check_same_bits_at_1_and_2_threads([](int threads) {
    set_threads(threads);
    Tensor q =
        random_tensor({4, 4, 96, 16}, 21, -1.5, 1.5, false).to(DType::f32).set_requires_grad(true);
    Tensor k =
        random_tensor({4, 4, 80, 16}, 22, -1.5, 1.5, false).to(DType::f32).set_requires_grad(true);
    Tensor v =
        random_tensor({4, 4, 80, 8}, 23, -1.5, 1.5, false).to(DType::f32).set_requires_grad(true);
    Tensor m =
        random_tensor({4, 1, 96, 80}, 24, -2, 2, false).to(DType::f32).set_requires_grad(true);
    Tensor y = scaled_dot_product_attention(q, k, v, m);
    backward(sum(mul(y, random_tensor(y.shape(), 25, -1, 1, false).to(DType::f32))));
    std::vector<std::vector<float>> r;
    for (const Tensor& t : {y, q.grad(), k.grad(), v.grad(), m.grad()}) {
      const Tensor c = t.contiguous();
      r.emplace_back(c.data<float>(), c.data<float>() + c.numel());
    }
    return r;
  });
}

TEST_CASE("packed_self_attention equals the split heads through scaled_dot_product_attention") {
  // qkv [N 2, L 5, 3·E] with E 8 in 2 heads; masks: none, [L, L], [N, 1, 1, L], [N, H, L, L]
  for (DType dt : {DType::f64, DType::f32}) {
    const double tolerance = dt == DType::f64 ? 1e-13 : 2e-6;
    const int64_t N = 2, L = 5, E = 8, H = 2;
    for (const Shape& mask_shape : {Shape{}, Shape{L, L}, Shape{N, 1, 1, L}, Shape{N, H, L, L}}) {
      CAPTURE(shape_str(mask_shape));
      auto run = [&](bool packed) {
        Tensor qkv = random_tensor({N, L, 3 * E}, 31, -1.5, 1.5, false).to(dt);
        qkv.set_requires_grad(true);
        Tensor m;
        if (!mask_shape.empty())
          m = random_tensor(mask_shape, 32, -2, 2, false).to(dt).set_requires_grad(true);
        Tensor y;
        if (packed) {
          y = packed_self_attention(qkv, H, m);
        } else {
          auto split = [&](int64_t part) {
            return permute(reshape(slice(qkv, 2, part * E, (part + 1) * E), {N, L, H, E / H}),
                           {0, 2, 1, 3});
          };
          const Tensor o = scaled_dot_product_attention(split(0), split(1), split(2), m);
          y = reshape(permute(o, {0, 2, 1, 3}), {N, L, E});
        }
        backward(sum(mul(y, random_tensor(y.shape(), 33, -1, 1, false).to(dt))));
        std::vector<std::vector<double>> r{y.to_vector(), qkv.grad().to_vector()};
        if (m.defined()) r.push_back(m.grad().to_vector());
        return r;
      };
      const auto packed = run(true), split = run(false);
      REQUIRE(packed.size() == split.size());
      for (size_t i = 0; i < packed.size(); ++i) check_close(packed[i], split[i], tolerance);
    }
  }
}

TEST_CASE("scaled_dot_product_attention matches torch 1.13 (forward and gradients)") {
  for (DType d : {DType::f64, DType::f32}) {
    CAPTURE(dtype_name(d));
    {
      Tensor q = leaf({2, 3, 4}, 7, 23, 11, 8.0, d), k = leaf({2, 5, 4}, 5, 17, 8, 16.0, d),
             v = leaf({2, 5, 3}, 3, 13, 6, 8.0, d);
      check_golden("sdpa.bool", scaled_dot_product_attention(q, k, v, keep_mask()), {q, k, v},
                   {"q", "k", "v"});
    }
    {
      Tensor q = leaf({2, 2, 3, 4}, 7, 23, 11, 8.0, d), k = leaf({2, 2, 5, 4}, 5, 17, 8, 16.0, d),
             v = leaf({2, 2, 5, 3}, 3, 13, 6, 8.0, d), m = leaf({2, 1, 3, 5}, 5, 9, 4, 4.0, d);
      check_golden("sdpa.additive", scaled_dot_product_attention(q, k, v, m, false, 0.7),
                   {q, k, v, m}, {"q", "k", "v", "mask"});
    }
    {
      Tensor q = leaf({1, 2, 5, 4}, 7, 23, 11, 8.0, d), k = leaf({1, 2, 3, 4}, 5, 17, 8, 16.0, d),
             v = leaf({1, 2, 3, 4}, 3, 13, 6, 8.0, d);
      check_golden("sdpa.causal", scaled_dot_product_attention(q, k, v, Tensor(), true), {q, k, v},
                   {"q", "k", "v"});
    }
  }
}

TEST_CASE("scaled_dot_product_attention: second derivatives (create_graph) pass gradgradcheck") {
  for (const OpCase& c : sdpa_op_cases()) {
    CAPTURE(c.name);
    const OpCaseGradgradResult r = run_op_case_gradgrad(c);
    INFO(r.grad.message);
    CHECK(r.supported);
    CHECK(r.grad.passed);
  }
}

TEST_CASE("scaled_dot_product_attention: errors name the op, the argument and the shapes") {
  const Tensor q = Tensor::zeros({2, 3, 4}), k = Tensor::zeros({2, 5, 4}),
               v = Tensor::zeros({2, 5, 6});
  auto says = [](const std::function<void()>& fn, std::vector<std::string> parts) {
    const std::string e = error_of(fn);
    CAPTURE(e);
    for (const std::string& p : parts) CHECK(contains(e, p));
  };
  const char* op = "scaled_dot_product_attention";
  says(
      [&] {
        scaled_dot_product_attention(q, Tensor::zeros({2, 5, 3}), v);
      },
      {op, "same last axis E", "[2, 5, 3]"});
  says(
      [&] {
        scaled_dot_product_attention(q, k, Tensor::zeros({2, 4, 6}));
      },
      {op, "same length S", "[2, 4, 6]"});
  says(
      [&] {
        scaled_dot_product_attention(q, Tensor::zeros({3, 5, 4}), v);
      },
      {op, "batch axes", "[3, 5, 4]"});
  says(
      [&] {
        scaled_dot_product_attention(q, k, v, Tensor::zeros({4, 5}));
      },
      {op, "does not broadcast to [2, 3, 5]", "[4, 5]"});
  says(
      [&] {
        scaled_dot_product_attention(q, k, v, Tensor::zeros({3, 5}), true);
      },
      {op, "either a mask or is_causal"});
  says(
      [&] {
        scaled_dot_product_attention(q, k, v, Tensor::zeros({3, 5}, DType::f64));
      },
      {op, "q's dtype"});
  says([&] { scaled_dot_product_attention(q, k.to(DType::f64), v); }, {op, "dtypes differ"});
  // an integer 0/1 mask is refused, as torch 2's (whose bool mask is True = take part)
  for (DType dt : {DType::i64, DType::i32, DType::u8})
    says(
        [&] {
          scaled_dot_product_attention(q, k, v, Tensor::ones({3, 5}, dt));
        },
        {op, "mask must be bool", dtype_name(dt), "dg::ne(mask, 0)"});
  says([&] { scaled_dot_product_attention(Tensor::zeros({4}), k, v); }, {op, "[..., L, E]"});
  says([&] { scaled_dot_product_attention(q, k, v, Tensor(), false, INFINITY); },
       {op, "not finite"});
  says(
      [&] {
        scaled_dot_product_attention(Tensor::zeros({2, 3, 0}), Tensor::zeros({2, 5, 0}), v);
      },
      {op, "E must be positive"});
  says([&] { scaled_dot_product_attention(q, k, Tensor()); }, {op, "defined"});
}

TEST_CASE("scaled_dot_product_attention: no key at all (S = 0) gives zeros, as an empty row") {
  Tensor q = random_tensor({2, 3, 4}, 31), k = random_tensor({2, 0, 4}, 32),
         v = random_tensor({2, 0, 5}, 33);
  Tensor y = scaled_dot_product_attention(q, k, v);
  CHECK(y.shape() == Shape{2, 3, 5});
  for (double x : y.to_vector()) CHECK(x == 0.0);
  backward(sum(y));
  for (double x : q.grad().to_vector()) CHECK(x == 0.0);
}

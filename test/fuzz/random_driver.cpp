// test/fuzz/random_driver.cpp: a main() for the fuzz targets when libFuzzer is not used
// (GCC builds, ctest): feeds the seeds, then a fixed number of deterministic random
// mutations of them. A broken invariant aborts, which fails the test. With clang, build
// with -DSANDBOX_FUZZ=ON instead to get coverage-guided fuzzing (see docs/api.md).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
extern const std::vector<std::string> fuzz_seeds;

int main(int argc, char** argv)
{
    long iterations = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 200000;
    auto run = [](const std::string& s) {
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
    };
    for (const auto& s : fuzz_seeds)
        run(s);
    std::mt19937_64 rng(0x5eed);
    const char alphabet[] = "0123456789abcdefxyz.-*/:@[]()% \n\t\0\x7f\xc3\xa9\xed\xa0\x80\xff"
                            "=msKMGiB";
    for (long i = 0; i < iterations; ++i)
    {
        std::string s = fuzz_seeds[rng() % fuzz_seeds.size()];
        int edits = 1 + static_cast<int>(rng() % 6);
        for (int e = 0; e < edits; ++e)
        {
            std::size_t pos = s.empty() ? 0 : rng() % (s.size() + 1);
            char c = alphabet[rng() % (sizeof alphabet - 1)];
            switch (rng() % 4)
            {
            case 0: s.insert(pos, 1, c); break;
            case 1: if (pos < s.size()) s[pos] = c; break;
            case 2: if (pos < s.size()) s.erase(pos, 1 + rng() % 4); break;
            case 3: s += s.substr(0, rng() % (s.size() + 1)); break;
            }
        }
        if (s.size() > 4096)
            s.resize(4096);
        run(s);
    }
    std::printf("%zu seeds and %ld mutations passed\n", fuzz_seeds.size(), iterations);
    return 0;
}

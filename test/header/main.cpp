// Links every public header's self-containment object into one program (see CMakeLists).
int main() { return 0; }

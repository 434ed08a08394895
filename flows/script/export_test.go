package script

// LuaLeaf is luaLeaf for the tests outside the package (they register
// through flows/registry, which imports this package).
const LuaLeaf = luaLeaf
